package k8stest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the lab's certificate authority and the files made from it: the API server's and
// kwok's serving certificates (for 127.0.0.1), the API server's client certificate towards
// kwok (its kubelet), and the service-account signing key.
type pki struct {
	ca                      string // the CA certificate, PEM
	caPEM                   []byte
	serverCert, serverKey   string
	kubeletCert, kubeletKey string
	clientCert, clientKey   string
	saPub, saKey            string
}

// newPKI writes the lab's keys and certificates into dir.
func newPKI(dir string) (*pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "gputriage-k8stest-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p := &pki{ca: filepath.Join(dir, "ca.crt"), caPEM: pemBlock("CERTIFICATE", caDER)}
	if err := os.WriteFile(p.ca, p.caPEM, 0o644); err != nil {
		return nil, err
	}
	issue := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", "", err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
			tmpl.DNSNames = []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return "", "", err
		}
		return writePair(dir, name, der, key)
	}
	if p.serverCert, p.serverKey, err = issue("kube-apiserver", 2, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if p.kubeletCert, p.kubeletKey, err = issue("kwok-kubelet", 3, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if p.clientCert, p.clientKey, err = issue("kube-apiserver-kubelet-client", 4, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	p.saPub, p.saKey, err = serviceAccountKey(dir)
	return p, err
}

// writePair writes a certificate and its key as dir/name.crt and dir/name.key.
func writePair(dir, name string, der []byte, key *ecdsa.PrivateKey) (string, string, error) {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	crt, kf := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(crt, pemBlock("CERTIFICATE", der), 0o644); err != nil {
		return "", "", err
	}
	return crt, kf, os.WriteFile(kf, pemBlock("EC PRIVATE KEY", keyDER), 0o600)
}

// serviceAccountKey writes the RSA key pair the API server signs service-account tokens with.
func serviceAccountKey(dir string) (pub, priv string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	pub, priv = filepath.Join(dir, "sa.pub"), filepath.Join(dir, "sa.key")
	if err := os.WriteFile(pub, pemBlock("PUBLIC KEY", pubDER), 0o644); err != nil {
		return "", "", err
	}
	return pub, priv, os.WriteFile(priv, pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)), 0o600)
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

package k8stest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
)

// The lab's users, by the tokens of the API server's token file. AdminUser is in
// system:masters; LimitedUser is in no group of its own (only system:authenticated, which
// every authenticated user gets), so that what it may do is exactly what RBAC objects bind
// to it by name: contrib/k8s/rbac.yaml's, once a test applies it.
const (
	AdminUser   = "lab-admin"
	LimitedUser = "gputriage-operator"
)

// Options tune a lab. The zero value is a lab whose exec runs commands with this test
// binary's environment, PATH led by the lab's ExecBin directory.
type Options struct {
	// SMI, when set, puts a fake nvidia-smi serving it on the PATH of every exec.
	SMI *scenario.SMI
	// ExecEnv are NAME=VALUE pairs added to the environment of every exec (after PATH, so a
	// PATH here replaces the lab's).
	ExecEnv []string
	// ExecDir is the working directory of every exec (default /).
	ExecDir string
	// APIServerArgs are added to kube-apiserver's command line (e.g. a --feature-gates).
	APIServerArgs []string
}

// Lab is a running control plane: kine on SQLite, kube-apiserver and kwok, on loopback ports
// of their own, under a temporary directory. It stops when the test ends.
type Lab struct {
	Dir string // the lab's directory: certificates, kubeconfigs, kine's database, logs
	// AdminKubeconfig and LimitedKubeconfig are kubeconfig files (one context each, a bearer
	// token) for AdminUser and LimitedUser.
	AdminKubeconfig, LimitedKubeconfig string
	// Client is a typed client as AdminUser; Config its REST configuration.
	Client *kubernetes.Clientset
	Config *rest.Config
	// Server is the API server's URL (https://127.0.0.1:PORT); CA its CA certificate, PEM.
	Server string
	CA     []byte
	// ExecBin is a directory first on the PATH of every exec: a test may put programs there
	// at any time.
	ExecBin string

	t       testing.TB
	daemons []*daemon
}

// Start starts a lab with the zero Options.
func Start(t testing.TB) *Lab { return StartWith(t, Options{}) }

// StartWith starts a lab: kine, then kube-apiserver once kine accepts connections, then kwok
// once the API server's /readyz answers; it returns when kwok's own server answers. Without
// the binaries (Binaries) the suite is skipped.
func StartWith(t testing.TB, o Options) *Lab {
	t.Helper()
	bin := Binaries(t)
	l := &Lab{Dir: t.TempDir(), t: t}
	l.ExecBin = filepath.Join(l.Dir, "bin")
	t.Cleanup(l.Stop)
	p, err := newPKI(l.Dir)
	if err != nil {
		t.Fatal(err)
	}
	l.CA = p.caPEM
	// Each daemon's ports are found free right before it starts, not all at once: a port found
	// free is free for any process of a shared machine until the daemon binds it, and the API
	// server takes seconds to become ready before kwok starts.
	ports := freePorts(t, 2)
	kineAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	l.start(filepath.Join(bin, "kine"), "--listen-address", kineAddr,
		"--endpoint", "sqlite://"+filepath.Join(l.Dir, "kine.db")+"?_journal=WAL&cache=shared",
		"--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(ports[1]))
	l.waitFor("kine accepting connections on "+kineAddr, func() bool { return dialable(kineAddr) })

	tokens := l.tokens()
	apiPort := freePorts(t, 1)[0]
	l.Server = "https://127.0.0.1:" + strconv.Itoa(apiPort)
	l.start(filepath.Join(bin, "kube-apiserver"), append(apiserverArgs(l.Dir, p, apiPort, kineAddr, tokens), o.APIServerArgs...)...)
	l.waitReady(l.Server + "/readyz")

	l.Config = &rest.Config{Host: l.Server, BearerToken: adminToken, TLSClientConfig: rest.TLSClientConfig{CAData: l.CA}}
	if l.Client, err = kubernetes.NewForConfig(l.Config); err != nil {
		t.Fatal(err)
	}
	l.AdminKubeconfig = l.kubeconfig("admin", AdminUser, adminToken)
	l.LimitedKubeconfig = l.kubeconfig("limited", LimitedUser, limitedToken)

	cfg, execPATH, err := l.kwokConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	kwokPort := freePorts(t, 1)[0]
	kwokAddr := "127.0.0.1:" + strconv.Itoa(kwokPort)
	l.startEnv([]string{"HOME=" + l.Dir, "PATH=" + execPATH}, filepath.Join(bin, "kwok"), "--kubeconfig", l.AdminKubeconfig,
		"--config", cfg, "--manage-all-nodes",
		"--node-ip", "127.0.0.1", "--node-port", strconv.Itoa(kwokPort), "--server-address", kwokAddr,
		"--tls-cert-file", p.kubeletCert, "--tls-private-key-file", p.kubeletKey)
	l.waitReady("https://" + kwokAddr + "/healthz")
	return l
}

// The bearer tokens of the token file: random per lab would buy nothing on loopback.
const (
	adminToken   = "gputriage-lab-admin-token"
	limitedToken = "gputriage-lab-limited-token"
)

// tokens writes the API server's static token file: token,user,uid[,"groups"].
func (l *Lab) tokens() string {
	path := filepath.Join(l.Dir, "tokens.csv")
	body := adminToken + "," + AdminUser + ",uid-admin,\"system:masters\"\n" +
		limitedToken + "," + LimitedUser + ",uid-limited\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		l.t.Fatal(err)
	}
	return path
}

// apiserverArgs are kube-apiserver's flags: loopback only, storage in kine, token and RBAC
// authentication and authorization, kwok as every node's kubelet (verified by the lab's CA),
// and off what a test needs not (admission that waits on controllers, profiling, priority
// and fairness).
func apiserverArgs(dir string, p *pki, port int, kine, tokens string) []string {
	return []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// The kubernetes service would point at a loopback address: no endpoints for it.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(port),
		"--etcd-servers=http://" + kine,
		"--tls-cert-file=" + p.serverCert,
		"--tls-private-key-file=" + p.serverKey,
		"--client-ca-file=" + p.ca,
		"--token-auth-file=" + tokens,
		"--authorization-mode=RBAC",
		"--anonymous-auth=false",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + p.saPub,
		"--service-account-signing-key-file=" + p.saKey,
		"--service-cluster-ip-range=10.96.0.0/24",
		"--kubelet-certificate-authority=" + p.ca,
		"--kubelet-client-certificate=" + p.clientCert,
		"--kubelet-client-key=" + p.clientKey,
		"--kubelet-preferred-address-types=InternalIP",
		// No controller manager runs: no service account is ever made for a pod to wait on.
		"--disable-admission-plugins=ServiceAccount",
		// The agent DaemonSet's pods are privileged, as on a real cluster.
		"--allow-privileged=true",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		"--v=1",
	}
}

// kubeconfig writes a kubeconfig for user with token and returns its path.
func (l *Lab) kubeconfig(name, user, token string) string {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["lab"] = &clientcmdapi.Cluster{Server: l.Server, CertificateAuthorityData: l.CA}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "lab", AuthInfo: user}
	cfg.CurrentContext = name
	path := filepath.Join(l.Dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		l.t.Fatal(err)
	}
	return path
}

// waitReady waits until url answers 200 to the admin token over the lab's CA.
func (l *Lab) waitReady(url string) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(l.CA)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer c.CloseIdleConnections()
	var last string
	l.waitFor(url+" answering 200", func() bool {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := c.Do(req)
		if err != nil {
			last = err.Error()
			return false
		}
		resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK
	}, func() string { return last })
}

// waitFor polls cond every 20 ms until it holds, failing the test (with the daemons' logs)
// when a daemon exits first or the bound passes: a minute stretched by the machine's load
// (testenv.Scale), no assertion of speed. why, if given, says what cond last saw.
func (l *Lab) waitFor(what string, cond func() bool, why ...func() string) {
	l.t.Helper()
	deadline := time.Now().Add(testenv.Scale(testenv.HangGuard))
	for !cond() {
		for _, d := range l.daemons {
			select {
			case <-d.done:
				l.t.Fatalf("k8stest: %s exited (%v) while waiting for %s:\n%s", d.name, d.err, what, d.tail())
			default:
			}
		}
		if time.Now().After(deadline) {
			seen := ""
			for _, w := range why {
				seen = " (last: " + w() + ")"
			}
			l.t.Fatalf("k8stest: timed out waiting for %s%s:\n%s", what, seen, l.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Logs returns the tail of each daemon's log.
func (l *Lab) Logs() string {
	var b strings.Builder
	for _, d := range l.daemons {
		fmt.Fprintf(&b, "== %s (%s)\n%s\n", d.name, d.log, d.tail())
	}
	return b.String()
}

func dialable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// freePorts returns n distinct loopback TCP ports free at the time of the call.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range ls {
		ln.Close()
	}
	return ports
}

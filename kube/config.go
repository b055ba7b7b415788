// Package kube reaches Kubernetes nodes through the API server, as kubectl does: the user's
// kubeconfig and context loaded by client-go's clientcmd (the KUBECONFIG list, --kubeconfig,
// --context, exec credential plugins, impersonation from the context's user), the nodes a
// target names (k8s/NODE, k8s/ for every GPU node, a label selector), the gputriage agent
// pod on each node (contrib/k8s/agent.yaml), and pods/exec into it through remotecommand
// (WebSocket, falling back to SPDY, as kubectl exec). It runs a sweep's command on a node
// with the sweep's bounds and deadline and returns what sshexec returns for an SSH host, so
// that everything after the byte stream is the same for both.
package kube

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// Prefix starts every target that names a Kubernetes node: k8s/NODE, or k8s/ alone for every
// GPU node of the context (or the nodes --k8s-selector picks).
const Prefix = "k8s/"

// DefaultAgentNamespace is where contrib/k8s/agent.yaml runs the agent.
const DefaultAgentNamespace = "gputriage"

// AgentLabel selects the agent's pods; AgentContainer is the container the probe runs in.
const (
	AgentLabel     = "app.kubernetes.io/name=gputriage-agent"
	AgentContainer = "agent"
)

// Config is how the cluster is reached, as kubectl's flags say it.
type Config struct {
	Kubeconfig     string // --kubeconfig; "" is $KUBECONFIG (a list), then ~/.kube/config
	Context        string // --context; "" is the kubeconfig's current context
	Selector       string // --k8s-selector: a label selector over nodes, for k8s/
	AgentNamespace string // --agent-namespace; "" is DefaultAgentNamespace
}

// Node returns the node a target names: "k8s/gpu01" is gpu01, "k8s/" is "" (every GPU node,
// or the nodes Selector picks). ok is false for a target that is not a Kubernetes one.
func Node(host string) (node string, ok bool) {
	if node, ok = strings.CutPrefix(host, Prefix); !ok {
		return "", false
	}
	return node, true
}

// Label is a node's name as a host of the sweep: its report name and capture file name.
func Label(node string) string { return Prefix + node }

// CheckNode refuses a node name the API server could not hold (a DNS-1123 subdomain), so
// that it is never spliced into a field selector or a message as something else.
func CheckNode(node string) error {
	if errs := validation.IsDNS1123Subdomain(node); len(errs) > 0 {
		return fmt.Errorf("%q is not a node name (at most 253 lower-case letters, digits, '-' and '.')", node)
	}
	return nil
}

// Cluster is one context of one kubeconfig, loaded once for a run.
type Cluster struct {
	cfg     Config
	context string // the context in use, for messages
	rest    *rest.Config
	cs      coreAPI
	ns      string
	// exec runs a command in an agent pod: stream, or a test's stand-in for the kubelet.
	exec func(ctx context.Context, pod string, argv []string, stdin []byte, stdout, stderr io.Writer) (int, error)
}

// Open loads the kubeconfig and context exactly as kubectl does (clientcmd's deferred loading
// rules: --kubeconfig, else every file of $KUBECONFIG merged, else ~/.kube/config; --context
// over current-context; exec credential plugins, auth providers, impersonation and the
// cluster's CA as the config says). Nothing is sent to the server yet.
func Open(c Config) (*Cluster, error) {
	if c.Selector != "" {
		if _, err := labels.Parse(c.Selector); err != nil {
			return nil, fmt.Errorf("--k8s-selector %q: %v", c.Selector, err)
		}
	}
	ns := c.AgentNamespace
	if ns == "" {
		ns = DefaultAgentNamespace
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, fmt.Errorf("--agent-namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	// client-go logs through klog on stderr (a stream closed at a host's deadline, a retry):
	// what happened to each node is said once, in its report.
	klog.SetLogger(logr.Discard())
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.Kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context})
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %v", err)
	}
	rc, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %v", err)
	}
	rc.UserAgent = "gputriage"
	rc.QPS, rc.Burst = 50, 100 // a sweep asks a few things of each node at once
	cs, err := newCore(rc)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %v", err)
	}
	name := c.Context
	if name == "" {
		name = raw.CurrentContext
	}
	k := &Cluster{cfg: c, context: name, rest: rc, cs: cs, ns: ns}
	k.exec = k.stream
	return k, nil
}

// Context is the kubeconfig context in use.
func (k *Cluster) Context() string { return k.context }

// Namespace is the agent's namespace.
func (k *Cluster) Namespace() string { return k.ns }

// Host is the API server's URL.
func (k *Cluster) Host() string { return k.rest.Host }

// Impersonating is the user the context's user acts as (as:), "" when none.
func (k *Cluster) Impersonating() string { return k.rest.Impersonate.UserName }

package kube

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
)

// stream runs argv in the agent container of pod with stdin, as kubectl exec -i does: over
// WebSocket, falling back to SPDY where the server (or a proxy on the way) cannot upgrade to
// it (remotecommand.NewFallbackExecutor with kubectl's rule); stdin nil: none. It returns the command's exit
// status when the server sent one (-1 when it did not), and an error for anything else.
func (k *Cluster) stream(ctx context.Context, pod string, argv []string, stdin []byte, stdout, stderr io.Writer) (int, error) {
	req := k.cs.execRequest(k.ns, pod, &corev1.PodExecOptions{Container: AgentContainer, Command: argv, Stdin: stdin != nil, Stdout: true, Stderr: true})
	spdy, err := remotecommand.NewSPDYExecutor(k.rest, http.MethodPost, req.URL())
	if err != nil {
		return -1, err
	}
	ws, err := remotecommand.NewWebSocketExecutor(k.rest, http.MethodGet, req.URL().String())
	if err != nil {
		return -1, err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return -1, err
	}
	so := remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr}
	if stdin != nil {
		so.Stdin = bytes.NewReader(stdin)
	}
	err = ex.StreamWithContext(ctx, so)
	var xe utilexec.ExitError
	if errors.As(err, &xe) && xe.Exited() {
		return xe.ExitStatus(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}

// Command webhook-peer is kube-retention's benchmark peer: a Go admission webhook that
// implements a subset of the rules of kube-retention's Rust webhook (webhook/ and common/),
// written the way a Go team would, with controller-runtime's webhook server and admission
// handlers. It is never shipped.
//
// It exists for two reasons: to measure the Rust webhook against what the common Go
// alternative costs (latency, memory, image size), and to run both on the same
// AdmissionReviews and compare their answers (differential testing). Durations are parsed with
// Go's own time.ParseDuration, on purpose: where the Rust port of that grammar disagrees, the
// comparison shows it.
//
// In scope: Shipwright Build and BuildRun validation, BuildRun TTL inheritance from its Build,
// and retention.dev/* annotations on objects of any kind (validation and the expires-at stamp).
// Out of scope (admitted unchanged): OpenShift-style builds, retention.dev policies and
// Cleaners, the writer check and the controller-permission warnings.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9443", "host:port to serve HTTPS on")
	certFile := flag.String("tls-cert", "tls.crt", "PEM certificate chain to serve")
	keyFile := flag.String("tls-key", "tls.key", "PEM private key of the certificate")
	// --kubeconfig (to read Builds with) is controller-runtime's own flag: without it,
	// in-cluster, then $KUBECONFIG, then ~/.kube/config.
	flag.Parse()
	ctrl.SetLogger(zap.New())
	if err := run(*listen, *certFile, *keyFile); err != nil {
		fmt.Fprintln(os.Stderr, "webhook-peer:", err)
		os.Exit(1)
	}
}

func run(listen, certFile, keyFile string) error {
	log := ctrl.Log.WithName("webhook-peer")
	server, err := newServer(listen, certFile, keyFile)
	if err != nil {
		return err
	}
	config, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Metrics:       metricsserver.Options{BindAddress: "0"},
		WebhookServer: server,
		// Builds are read as unstructured objects, from an informer cache like typed ones.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	// Start the Build informer with the manager rather than on the first BuildRun.
	if _, err := mgr.GetCache().GetInformer(ctx, newBuild()); err != nil {
		log.Error(err, "cannot watch Builds: BuildRuns are admitted without inherited settings")
	}
	// The manager runs the webhook server once asked for it (GetWebhookServer adds it).
	server = mgr.GetWebhookServer()
	server.Register("/validate", &webhook.Admission{Handler: Validator{}})
	server.Register("/mutate", &webhook.Admission{Handler: &Mutator{
		Parents: clientParents{reader: mgr.GetClient()},
		Now:     time.Now,
	}})
	server.Register("/healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	log.Info("serving admission webhook", "listen", listen)
	return mgr.Start(ctx)
}

// newServer is controller-runtime's webhook server on listen, serving the certificate and key
// (reloaded when they change).
func newServer(listen, certFile, keyFile string) (webhook.Server, error) {
	host, portText, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("--listen: port %q: %w", portText, err)
	}
	certDir, certName, keyName, err := certPaths(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return webhook.NewServer(webhook.Options{
		Host:     host,
		Port:     port,
		CertDir:  certDir,
		CertName: certName,
		KeyName:  keyName,
	}), nil
}

// certPaths splits the certificate and key paths into the directory controller-runtime wants
// and names within it (the key's name is relative when it lives elsewhere).
func certPaths(certFile, keyFile string) (dir, certName, keyName string, err error) {
	certAbs, err := filepath.Abs(certFile)
	if err != nil {
		return "", "", "", fmt.Errorf("--tls-cert: %w", err)
	}
	keyAbs, err := filepath.Abs(keyFile)
	if err != nil {
		return "", "", "", fmt.Errorf("--tls-key: %w", err)
	}
	dir = filepath.Dir(certAbs)
	keyName, err = filepath.Rel(dir, keyAbs)
	if err != nil {
		return "", "", "", fmt.Errorf("--tls-key: %w", err)
	}
	return dir, filepath.Base(certAbs), keyName, nil
}

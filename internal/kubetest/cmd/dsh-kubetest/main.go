//go:build linux

// Command dsh-kubetest serves a test Kubernetes API server (package kubetest)
// with one pod, "dev" (label app=dev), for trying dsh's Kubernetes plugins by
// hand. It prints the kubeconfig's path and serves until interrupted; the
// pod's processes end with it. It must run as root.
//
//	go run ./internal/kubetest/cmd/dsh-kubetest
//	KUBECONFIG=<printed path> kubectl exec -it dev -- sh
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/dshrun/dsh/internal/kubetest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "dsh-kubetest:", err)
		os.Exit(1)
	}
}

func run() error {
	s, err := kubetest.Start()
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.AddPod("dev", map[string]string{"app": "dev"}); err != nil {
		return err
	}
	fmt.Println(s.Kubeconfig)
	fmt.Fprintf(os.Stderr, "serving %s with pod \"dev\" in namespace %q; try: KUBECONFIG=%s kubectl exec -it dev -- sh\n",
		s.URL, s.Namespace, s.Kubeconfig)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	return nil
}

// Command pause is the pause image of the test node (make cluster): the
// process that holds a Pod sandbox's namespaces. It waits for SIGTERM or
// SIGINT and exits 0. A process with PID 1 gets no signal it has not asked
// for, so busybox there would ignore the kubelet's SIGTERM and every Pod
// deletion would wait out the grace period before SIGKILL.
//
//	CGO_ENABLED=0 go build -o pause ./hack/pause
//	go run ./hack/image files -tag pause:test -o pause.tar -entrypoint /pause pause:/pause
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}

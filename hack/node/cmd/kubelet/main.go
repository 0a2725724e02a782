// Command kubelet is the upstream kubelet, built from the pinned
// k8s.io/kubernetes module so the e2e suite runs real nodes on one machine
// (see hack/node-setup.sh).
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	command := app.NewKubeletCommand(context.Background())
	os.Exit(cli.Run(command))
}

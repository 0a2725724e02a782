// Command kube-controller-manager is the upstream controller manager, built
// from the pinned k8s.io/kubernetes module so the deployment, replicaset,
// daemonset, disruption and garbage-collector controllers in tests and the
// demo are the real ones.
package main

import (
	"os"

	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	command := app.NewControllerManagerCommand()
	os.Exit(cli.Run(command))
}

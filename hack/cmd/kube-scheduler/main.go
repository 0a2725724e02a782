// Command kube-scheduler is the upstream kube-scheduler, built from the pinned
// k8s.io/kubernetes module so tests and the demo run the real scheduler (with
// the nodeqos extender configured through its KubeSchedulerConfiguration).
package main

import (
	"os"

	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	command := app.NewSchedulerCommand()
	os.Exit(cli.Run(command))
}

// Command etcd is etcd's server entry point, built from the pinned
// go.etcd.io/etcd/server/v3 module so tests need no downloaded binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}

// Command etcd is the etcd server at the exact version the pinned Kubernetes release requires.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}

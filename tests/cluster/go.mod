// The local cluster's commands (cmd/etcd and the Kubernetes ones tools.go names). This file only
// says where the module is: each Kubernetes minor's dependencies are in kubernetes/1.NN.mod
// (written by kubernetes/pin.sh), which build.sh builds with `go build -modfile`.
module kube-retention/tests/cluster

go 1.25.0

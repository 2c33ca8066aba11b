module kube-retention/common/testdata/go-duration-cases

go 1.25.0

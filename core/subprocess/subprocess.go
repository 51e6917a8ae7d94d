// Package subprocess is the service definition of ctx.subprocess as
// plugins see it: the key and the dsh.subprocess.v1 contract. The host
// provides it (package host/core/subprocess); plugins reach it with
// sdk.Host.Conn(subprocess.Key) and subprocessv1.NewSubprocessClient.
package subprocess

import "github.com/dshrun/dsh/core/subprocess/subprocessv1"

// Key is the service key: ctx.subprocess.
const Key = "subprocess"

// ServiceName is the gRPC service the host serves under Key.
var ServiceName = subprocessv1.Subprocess_ServiceDesc.ServiceName

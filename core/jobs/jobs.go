// Package jobs is the service definition of ctx.jobs as plugins see it:
// the key and the dsh.jobs.v1 contract. The host provides it (package
// host/core/jobs).
package jobs

import "github.com/dshrun/dsh/core/jobs/jobsv1"

// Key is the service key: ctx.jobs.
const Key = "jobs"

// ServiceName is the gRPC service the host serves under Key.
var ServiceName = jobsv1.Jobs_ServiceDesc.ServiceName

// DefaultShellKey is the executor a registration that names none means:
// ctx.shell (the key of package plugins/shell, spelled out so that this
// contract does not depend on that one).
const DefaultShellKey = "shell"

package observability

// NewTracingWith returns the Tracing of an SDK provider the test built,
// with its own span processor.
var NewTracingWith = newTracing

// BuildVersion is how NewRegistry fills an empty version or revision.
var BuildVersion = buildVersion

package routes

// What the external tests (package routes_test: the fuzz target, which
// plans what it parses and so imports candidates) need of the package's
// internals and of its internal tests.
var (
	ExpandString = expandString
	Env          = env
)

const (
	MinRedactedKey = minRedactedKey
	ValidRoutes    = validRoutes
	ErrorsBase     = errorsBase
	CostRoutes     = costRoutes
)

package candidates

// env is a lookup for routes.Parse over m, so tests need not touch the
// process environment.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

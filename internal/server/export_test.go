package server

// RetiredClients is how many retired provider clients the reload state
// still lists, for the test that reloads do not grow it.
func (g *Gateway) RetiredClients() int {
	g.reload.mu.Lock()
	defer g.reload.mu.Unlock()
	return len(g.reload.retired)
}

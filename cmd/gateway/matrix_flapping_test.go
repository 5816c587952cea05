package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// flapDown is how long the flapping primary is down (503) before it is up
// again.
const flapDown = 2500 * time.Millisecond

// flapping: gpt-4o answers 503 for flapDown, then serves. Requests keep
// coming every 100ms; the fallback answers every one while gpt-4o is down,
// health cools gpt-4o (1s, then 2s: max_cooldown) so it is not hammered,
// and once it is up traffic is back on it within max_cooldown.
func flapping(t *testing.T, g *matrixGateway, w *matrixWorld) string {
	const maxCooldown = 2 * time.Second
	b, _ := w.primary.ModelBehavior(primaryModel) // arm set the window: DownFor from then
	up := b.DownUntil
	if up.IsZero() {
		t.Fatal("gpt-4o has no down window")
	}
	type sent struct {
		at  time.Time
		res clientResult
	}
	var all []sent
	back := time.Time{}
	tick := time.NewTicker(100 * time.Millisecond) // the load's pace, not a synchronisation
	defer tick.Stop()
	for time.Since(up) < maxCooldown+time.Second {
		at := time.Now()
		res := g.send(t, w.route, false)
		all = append(all, sent{at, res})
		if res.status != http.StatusOK {
			t.Errorf("request at %s (up at %s): %s", at.Format("05.000"), up.Format("05.000"), res)
		}
		if res.text == answer(primaryIdentity) && back.IsZero() {
			back = at.Add(res.elapsed) // the answer's end: an attempt retried may have started before up
		}
		if !back.IsZero() && res.text != answer(primaryIdentity) {
			t.Errorf("a request at %s went to the fallback after gpt-4o was back at %s", at.Format("05.000"), back.Format("05.000"))
		}
		if !back.IsZero() && time.Since(back) > 500*time.Millisecond {
			break
		}
		<-tick.C
	}
	switch {
	case back.IsZero():
		t.Fatalf("gpt-4o never got traffic back within %s of being up", maxCooldown+time.Second)
	case back.Before(up):
		t.Errorf("gpt-4o answered at %s, before its outage ended at %s", back.Format("05.000"), up.Format("05.000"))
	case back.Sub(up) > maxCooldown+300*time.Millisecond:
		t.Errorf("traffic came back to gpt-4o %s after it was up, want within max_cooldown %s", back.Sub(up).Round(time.Millisecond), maxCooldown)
	}
	// While it was down, health kept most requests off gpt-4o.
	var down, cooled int
	for _, a := range w.arr.snapshot() {
		if a.model == primaryModel && a.at.Before(up) {
			down++
		}
	}
	var during int
	for _, s := range all {
		if s.at.Add(s.res.elapsed).After(up) { // only requests over before gpt-4o was up
			continue
		}
		during++
		if s.res.text != answer(fallbackIdentity) {
			t.Errorf("a request during the outage got %s", s.res)
		}
		if _, rows := g.records(t, s.res.id); rows[0].status == "skipped" && rows[0].skip == "cooling_down" {
			cooled++
		}
	}
	if cooled == 0 || down > 10 || during < 10 {
		t.Errorf("during the outage: %d requests, %d attempts on gpt-4o, %d skipped it cooling_down; want health to keep it cool",
			during, down, cooled)
	}
	t.Logf("outage: %d requests, %d reached gpt-4o, %d skipped it; back on gpt-4o %s after it was up",
		during, down, cooled, back.Sub(up).Round(time.Millisecond))
	return fmt.Sprintf("all 200, fallback while down, gpt-4o cooled, back within max_cooldown: %v", !t.Failed())
}

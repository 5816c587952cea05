package report

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestReplicaStampedAndSpooled protects requests.replica: the writer stamps
// its Options.Replica on every request record that names none, keeps one that
// does, and a record spooled during an outage keeps the replica that served it
// when another writer (another replica name) replays the spool. The timeline
// shows the column.
func TestReplicaStampedAndSpooled(t *testing.T) {
	dsn := migratedURL(t)
	spoolDir := t.TempDir()

	// Postgres unreachable: everything goes to the spool.
	down, _ := newTestWriter(t, "postgres://postgres@127.0.0.1:1/x?connect_timeout=1", func(o *Options) {
		o.SpoolDir, o.Replica, o.FlushInterval = spoolDir, "replica-a", time.Hour
	})
	down.Start(context.Background())
	spooledID := uuid.New()
	down.RecordRequest(Request{ID: spooledID, Status: RequestSuccess, StatusCode: 200})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := down.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if st := down.Stats(); st.Spooled != 1 {
		t.Fatalf("stats %+v, want the record spooled", st)
	}

	// Another replica's writer on the same spool directory, with Postgres up.
	up, _ := newTestWriter(t, dsn, func(o *Options) { o.SpoolDir, o.Replica = spoolDir, "replica-b" })
	up.Start(context.Background())
	// StateOK: connected and the spool replayed.
	waitFor(t, "state ok", 10*time.Second, func() bool { return up.State() == StateOK })
	stampedID, explicitID := uuid.New(), uuid.New()
	up.RecordRequest(Request{ID: stampedID, Status: RequestPending})
	up.RecordRequest(Request{ID: stampedID, Status: RequestSuccess, StatusCode: 200})
	up.RecordRequest(Request{ID: explicitID, Status: RequestFailed, StatusCode: 502, Replica: "named-by-caller"})
	if err := up.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}

	for _, tc := range []struct {
		name string
		id   uuid.UUID
		want string
	}{
		{"spooled by replica-a, replayed by replica-b", spooledID, "replica-a"},
		{"recorded by replica-b", stampedID, "replica-b"},
		{"named by the caller", explicitID, "named-by-caller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := queryInt(t, dsn, "SELECT count(*) FROM requests WHERE id = $1 AND replica = $2", tc.id, tc.want); n != 1 {
				t.Errorf("rows with replica %q: %d, want 1", tc.want, n)
			}
		})
	}

	w := connectedWriter(t, dsn)
	tl, err := w.Timeline(context.Background(), stampedID)
	if err != nil {
		t.Fatalf("Timeline: %v", err)
	}
	if tl.Request.Replica != "replica-b" {
		t.Errorf("timeline replica %q, want replica-b", tl.Request.Replica)
	}
}

// TestReplicaUpsertKeepsStored: a later record without a replica (one written
// by code that predates the column) does not blank the stored one.
func TestReplicaUpsertKeepsStored(t *testing.T) {
	dsn := migratedURL(t)
	w := connectedWriter(t, dsn)
	id := uuid.New()
	mustUpsert(t, w, []record{{kind: kindRequest, req: Request{ID: id, Status: RequestPending, Replica: "r1", CreatedAt: baseTime}}})
	mustUpsert(t, w, []record{{kind: kindRequest, req: Request{ID: id, Status: RequestSuccess, StatusCode: 200}}})
	if n := queryInt(t, dsn, "SELECT count(*) FROM requests WHERE id = $1 AND replica = 'r1' AND status = 'success'", id); n != 1 {
		t.Errorf("row lost its replica or status (want r1, success)")
	}
}

// TestCodecOldFrames: request frames spooled by earlier versions, which end
// before the route or before the replica, still decode, with those fields
// empty (stored as the column defaults).
func TestCodecOldFrames(t *testing.T) {
	base := Request{ID: uuid.New(), CreatedAt: baseTime, Model: "m", Status: RequestSuccess, StatusCode: 200}
	for _, tc := range []struct {
		name      string
		route     string
		cut       int // trailing bytes the older version did not write
		wantRoute string
	}{
		{"before replicas", "messages", 1, "messages"}, // drops the empty replica's length byte
		{"before routes", "", 2, ""},                   // drops the empty route's and replica's
		{"current", "embeddings", 0, "embeddings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			r.Route = tc.route
			rec := record{kind: kindRequest, req: r}
			payload := appendFrame(nil, &rec)[frameHeader:]
			// A version 1 frame: without version 2's team and cost.
			payload = payload[:len(payload)-v2RequestTail(&r)]
			payload[0] = 1
			payload = payload[:len(payload)-tc.cut]
			var got record
			if err := decodePayload(payload, &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if got.req.Route != tc.wantRoute || got.req.Replica != "" || got.req.ID != r.ID || got.req.StatusCode != 200 {
				t.Errorf("decoded %+v, want route %q and no replica", got.req, tc.wantRoute)
			}
		})
	}
	// And a current frame keeps the replica.
	rec := record{kind: kindRequest, req: base}
	rec.req.Replica = "gw-7"
	var got record
	if err := decodePayload(appendFrame(nil, &rec)[frameHeader:], &got); err != nil || got.req.Replica != "gw-7" {
		t.Errorf("round trip: replica %q, err %v; want gw-7", got.req.Replica, err)
	}
}

// v2RequestTail is how many bytes versions 2 to 4 add at the end of r's
// frame.
func v2RequestTail(r *Request) int {
	v3 := appendString(appendCost(appendString(nil, r.Team), usageCost{r.CachedTokens, r.CacheWriteTokens, r.ReasoningTokens,
		r.UsageEstimated, r.HasCost, r.CostUSD}), r.TraceID)
	return len(v3) + len(appendString(nil, r.Cache)) + 1 + 8 // cache, has saved, saved
}

package quota

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// PublishCooled tells the other replicas that this one cooled a target
// until the given time. It never blocks (it runs on the request path): a
// message that finds the queue full is dropped, and the other replicas then
// learn of the failures themselves, as without Redis.
func (s *Store) PublishCooled(targetID string, until time.Time, reason string) {
	msg := s.replica + "/" + s.nonce + " " + targetID + " " + strconv.FormatInt(until.UnixMilli(), 10) + " " + reason
	select {
	case s.cooling <- msg:
	default:
	}
}

func (s *Store) publishLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case msg := <-s.cooling:
			if s.degraded.Load() {
				continue
			}
			octx, cancel := s.opContext(ctx)
			_ = s.rdb.Publish(octx, s.n.health, msg).Err()
			cancel()
		}
	}
}

// cooledMessage applies another replica's cooldown; this replica's own
// messages come back too and are ignored.
func (s *Store) cooledMessage(payload string) {
	f := strings.Fields(payload)
	if len(f) != 4 || f[0] == s.replica+"/"+s.nonce || s.hooks.Cooled == nil {
		return
	}
	ms, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return
	}
	s.hooks.Cooled(f[1], time.UnixMilli(ms), f[3])
}

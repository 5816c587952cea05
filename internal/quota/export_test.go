package quota

import "time"

// kill stops the store as a replica that dies: no last release, no more
// renewals; its leases stay in Redis until they expire.
func (s *Store) kill() {
	if s.stop != nil {
		s.stop()
		s.wg.Wait()
	}
	_ = s.rdb.Close()
}

// settled waits until every slot given back has been removed in Redis.
func (s *Store) settled() {
	for {
		s.mu.Lock()
		done := len(s.releases) == 0 && s.flushing == 0
		s.mu.Unlock()
		if done {
			return
		}
		select {
		case s.kick <- struct{}{}:
		default:
		}
		time.Sleep(time.Millisecond)
	}
}

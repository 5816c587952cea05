package report

import "github.com/google/uuid"

// holder picks the records of a batch that wait for the next one.
//
// Most requests start and finish within a flush interval or two, so a batch
// often holds the first records of a row (pending, streaming) and the next one
// its last (success). Written as they come, such a row costs Postgres an
// insert and then an update (a lock, a new tuple version and new index
// entries), about twice a single insert. So a row whose records in a batch are
// all non-terminal, and none of which was held already, is held back one
// flush: if its final record comes by then, the row is written once. Held
// records stay in the batcher's hands (at the head of the next batch), so a
// Close still writes them and an outage still spools them; a SIGKILL may lose
// them, as it may lose the batch being filled. Nothing is held twice, so an
// in-flight request reaches the ledger at most two flush intervals after it
// was recorded instead of one.
type holder struct {
	reqs  map[uuid.UUID]holdState
	cands map[candidateKey]holdState
	held  []record // scratch for split
}

// holdState is what a batch says about one row.
type holdState uint8

const (
	holdFinal   holdState = 1 << iota // a record of the row has a terminal status
	holdCarried                       // the row already waited one flush
)

func newHolder() *holder {
	return &holder{reqs: make(map[uuid.UUID]holdState), cands: make(map[candidateKey]holdState)}
}

// split reorders recs so that the records to write now come first, in their
// order, followed by those to hold, in theirs, and returns how many to write.
// The first carried records of recs were held by the previous split: they are
// written now, with every other record of their rows.
func (h *holder) split(recs []record, carried int) (write int) {
	defer func() {
		clear(h.reqs)
		clear(h.cands)
	}()
	for i := range recs {
		var st holdState
		if i < carried {
			st = holdCarried
		}
		switch rec := &recs[i]; rec.kind {
		case kindRequest:
			if requestRank[rec.req.Status] > 0 {
				st |= holdFinal
			}
			h.reqs[rec.req.ID] |= st
		case kindCandidate:
			if candidateRank[rec.cand.Status] >= candidateRank[CandidateSuccess] {
				st |= holdFinal
			}
			h.cands[rec.cand.key()] |= st
		}
	}
	for i := range recs {
		var st holdState
		switch rec := &recs[i]; rec.kind {
		case kindRequest:
			st = h.reqs[rec.req.ID]
		case kindCandidate:
			st = h.cands[rec.cand.key()]
		default:
			st = holdFinal // prepare has removed these; never hold what is not understood
		}
		if st == 0 {
			h.held = append(h.held, recs[i])
			continue
		}
		recs[write] = recs[i]
		write++
	}
	copy(recs[write:], h.held)
	clear(h.held)
	h.held = h.held[:0]
	return write
}

package candidates

import (
	"testing"

	"go.uber.org/goleak"
)

// The loop starts goroutines while it holds a stream's first events (a
// commit point bounded in time); none may outlive its attempt.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

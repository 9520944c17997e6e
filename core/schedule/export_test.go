package schedule

import (
	"context"
	"time"
)

// Pass is one look at the schedules, for the tests of package
// schedule_test (which cannot be package schedule: they use the stores,
// which import it).
func Pass(ctx context.Context, s *Scheduler) (time.Duration, error) { return s.pass(ctx) }

// Due exposes Spec.due to the tests.
func Due(sp Spec, first, now time.Time) (time.Time, int, bool) { return sp.due(first, now) }

package delivery

import (
	"time"

	"github.com/opsgate/opsgate/core/pace"
)

// ObserveGrants has f called with every grant of w's pacer at its exact
// instant; call it before Run.
func ObserveGrants(w *Worker, f func(at time.Time, k pace.Keys)) {
	lim, err := pace.New(specOf(w.o.Platform.Pacing()), pace.OnGrant(f))
	if err != nil {
		panic(err) // New accepted the same spec
	}
	w.lim = lim
}

// TakeOver exposes takeOver.
var TakeOver = takeOver

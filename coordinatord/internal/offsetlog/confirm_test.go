package offsetlog

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strataio/strata/coordinatord/internal/group"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/fake/partitionfake"
)

func TestConfirmFailsOnceANewerOwnerTookOver(t *testing.T) {
	fake, c := startFake(t)
	ctx := ctxT(t)
	l1, _ := mustTakeover(t, c, 1)
	g := group.New("g", group.Selector{Topic: "t"}, []group.TP{tp("t", 0)}, 1)
	must(t, l1.Append(ctx, []Value{Registration(g), Offset("g", 1, tp("t", 0), 5)}))

	// The sole writer confirms with one ListOffsets and writes nothing.
	appends := fake.Appends()
	must(t, l1.Confirm(ctx))
	if fake.Appends() != appends {
		t.Fatalf("a confirmation of the sole writer appended %d records", fake.Appends()-appends)
	}

	// A newer owner takes over (its view moved on, l1's did not).
	l2, _ := mustTakeover(t, c, 2)
	err := l1.Confirm(ctx)
	if e := errcode.From(err); e.Code != errcode.CoordinatorNotAvailable.Name() || e.Field("reason") != "fenced" || !e.Retryable {
		t.Fatalf("deposed owner confirmed: %v", err)
	}
	if l1.Fenced() == nil {
		t.Fatal("a failed confirmation must leave the deposed owner fenced")
	}
	must(t, l2.Confirm(ctx))
	must(t, l2.Append(ctx, []Value{Offset("g", 1, tp("t", 0), 9)}))
	must(t, l2.Confirm(ctx))
}

func TestConfirmProvesOwnershipWhenItsEndIsUnknown(t *testing.T) {
	cases := []struct {
		name string
		// unknown leaves l (epoch 5) with an unknown end.
		unknown func(t *testing.T, l *Log, fake *partitionfake.Server, c Client) *Log
	}{
		{"append outcome unknown", func(t *testing.T, l *Log, fake *partitionfake.Server, c Client) *Log {
			answer := loseAnswers(fake)
			short, cancel := context.WithTimeout(ctxT(t), 100*time.Millisecond)
			defer cancel()
			if err := l.Append(short, []Value{Offset("g", 1, tp("t", 0), 7)}); err == nil {
				t.Fatal("lost answers must fail the append")
			}
			answer()
			return l
		}},
		{"marker answered as a duplicate", func(t *testing.T, l *Log, fake *partitionfake.Server, c Client) *Log {
			answer := loseAnswers(fake)
			short, cancel := context.WithTimeout(ctxT(t), 100*time.Millisecond)
			defer cancel()
			if _, _, err := Takeover(short, c, opts(6)); err == nil {
				t.Fatal("lost answers must fail the takeover")
			}
			answer()
			l2, _, err := Takeover(ctxT(t), c, opts(6))
			if err != nil {
				t.Fatal(err)
			}
			return l2
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name+"/still the owner", func(t *testing.T) {
			fake, c := startFake(t)
			l, _ := mustTakeover(t, c, 5)
			l = tc.unknown(t, l, fake, c)
			appends := fake.Appends()
			must(t, l.Confirm(ctxT(t)))
			if fake.Appends() == appends {
				t.Fatal("with an unknown end the proof must be an append")
			}
			// The proof re-learned the end: the next confirmation is cheap.
			appends = fake.Appends()
			must(t, l.Confirm(ctxT(t)))
			if fake.Appends() != appends {
				t.Fatal("second confirmation appended again")
			}
		})
		t.Run(tc.name+"/deposed meanwhile", func(t *testing.T) {
			fake, c := startFake(t)
			l, _ := mustTakeover(t, c, 5)
			l = tc.unknown(t, l, fake, c)
			mustTakeover(t, c, 9)
			if err := l.Confirm(ctxT(t)); errcode.From(err).Field("reason") != "fenced" {
				t.Fatalf("deposed owner with an unknown end confirmed: %v", err)
			}
		})
	}
}

func TestConcurrentConfirmsShareRounds(t *testing.T) {
	fake, c := startFake(t)
	l, _ := mustTakeover(t, c, 1)
	fake.On("ListOffsets", 0, fakerpc.DelayAnswer(20*time.Millisecond))
	before := fake.Calls("ListOffsets")
	const n = 64
	mustAllSucceed(t, n, func(int) error { return l.Confirm(ctxT(t)) })
	if got := fake.Calls("ListOffsets") - before; got > n/4 {
		t.Fatalf("%d ListOffsets calls for %d concurrent confirmations: not coalesced", got, n)
	}
}

// TestConfirmRoundsNeverAnswerFromAnEarlierRound checks the coalescing
// rule itself: every caller's answer comes from a round that started after
// the caller arrived.
func TestConfirmRoundsNeverAnswerFromAnEarlierRound(t *testing.T) {
	var rounds confirmRounds
	var clock atomic.Int64 // advanced by every arrival
	run := func() error {
		started := clock.Load()
		time.Sleep(time.Millisecond)
		return errors.New(strconv.FormatInt(started, 10))
	}
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				arrived := clock.Add(1)
				err := rounds.do(context.Background(), run)
				started, _ := strconv.ParseInt(err.Error(), 10, 64)
				if started < arrived {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d answers came from a round that started before the caller arrived", bad.Load())
	}
}

func TestConfirmGivesUpWithTheCallersContext(t *testing.T) {
	fake, c := startFake(t)
	l, _ := mustTakeover(t, c, 1)
	undelay := fake.On("ListOffsets", 0, fakerpc.DelayAnswer(300*time.Millisecond))
	// One caller holds the round; a second caller with a short deadline
	// waits for the next round and gives up in time.
	go func() { _ = l.Confirm(context.Background()) }()
	time.Sleep(20 * time.Millisecond)
	short, cancel := context.WithTimeout(ctxT(t), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := l.Confirm(short)
	if e := errcode.From(err); err == nil || !e.Retryable {
		t.Fatalf("want a retryable interruption, got %v", err)
	}
	if time.Since(start) > 250*time.Millisecond {
		t.Fatalf("gave up after %v", time.Since(start))
	}
	// Let the background rounds finish before the leak check.
	undelay()
	must(t, l.Confirm(ctxT(t)))
}

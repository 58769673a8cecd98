package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"go.etcd.io/etcd/clientv3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// worker is one client of a workload: pinned to one member (its home),
// with a random source of its own and its current proc number (a new one
// after each indeterminate outcome). It fails over as a client of a
// member it cannot reach does: after failoverAfter timeouts in a row it
// talks to the next member (ep, cli), and failoverBack after that it
// tries its home again (so it comes back once its home answers). Other
// errors (a refusal, no leader) keep it where it is.
type worker struct {
	id       int
	home, at int // the members' indexes in cfg.endpoints
	ep       string
	cli      *clientv3.Client
	clis     []*clientv3.Client // a connection per member, dialled when first used
	timeouts int                // in a row, at the current member
	away     time.Time          // when it last moved
	rng      *rand.Rand
	proc     int
	cfg      *config
	rec      *recorder
}

const (
	failoverAfter = 2
	failoverBack  = 3 * time.Second
)

// use makes member i the worker's current one, dialling it if needed;
// false (the worker staying where it was) when it cannot be dialled.
func (w *worker) use(i int) bool {
	if w.clis[i] == nil {
		cli, err := dial(w.cfg.endpoints[i])
		if err != nil {
			logf("client %d: %v", w.id, err)
			return false
		}
		w.clis[i] = cli
	}
	w.at, w.ep, w.cli = i, w.cfg.endpoints[i], w.clis[i]
	w.timeouts, w.away = 0, time.Now()
	return true
}

// steer counts an operation's timeout, and after failoverAfter in a row
// moves the worker on to the next member.
func (w *worker) steer(err error) {
	if err == nil {
		w.timeouts = 0
		return
	}
	if !timedOut(err) || len(w.clis) < 2 {
		return
	}
	if w.timeouts++; w.timeouts >= failoverAfter {
		next := (w.at + 1) % len(w.clis)
		if w.use(next) {
			logf("client %d: %d timeouts in a row: fails over to %s", w.id, failoverAfter, w.ep)
		}
	}
}

// steerHome moves the worker back to its home member once its time away
// is over.
func (w *worker) steerHome() {
	if w.at != w.home && time.Since(w.away) >= failoverBack {
		w.use(w.home)
	}
}

// timedOut reports whether err is the client's own deadline passing (no
// answer in time), not an answer of the member.
func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded
}

func (w *worker) close() {
	for _, cli := range w.clis {
		if cli != nil {
			cli.Close()
		}
	}
}

// runWorkers runs body on each of the -clients workers at once and waits
// for them all; body returns when ctx ends.
func runWorkers(ctx context.Context, cfg *config, rec *recorder, body func(context.Context, *worker)) {
	var wg sync.WaitGroup
	for c := 0; c < cfg.clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			w := &worker{id: c, home: c % len(cfg.endpoints), clis: make([]*clientv3.Client, len(cfg.endpoints)),
				proc: c, cfg: cfg, rec: rec, rng: rand.New(rand.NewSource(cfg.seed*7919 + int64(c)))}
			defer w.close()
			if !w.use(w.home) {
				return
			}
			body(ctx, w)
		}(c)
	}
	wg.Wait()
}

// timed makes one request (call, which fills op from the answer) under
// a deadline d away and sets op's times and outcome.
func timed(d time.Duration, op *Op, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	op.Call = time.Now().UnixNano()
	err := call(ctx)
	op.Ret = time.Now().UnixNano()
	op.Type, op.Err = outcome(err)
	return err
}

// do makes one operation of the worker under the -timeout deadline (see
// timed) and records it. The operation does not end with the run: one
// under way when the run ends has its deadline to finish.
func (w *worker) do(op *Op, call func(context.Context) error) error {
	return w.doWithin(w.cfg.timeout, op, call)
}

// doWithin is do with a deadline d away. After an error the worker
// waits errorPause: a member that refuses at once (no leader) would
// otherwise be asked, and the history grow, thousands of times a second.
func (w *worker) doWithin(d time.Duration, op *Op, call func(context.Context) error) error {
	w.steerHome()
	op.Proc, op.Client, op.Ep = w.proc, w.id, w.ep
	err := timed(d, op, call)
	w.rec.add(*op)
	if op.Type == typeInfo {
		w.proc += w.cfg.clients
	}
	w.steer(err)
	if err != nil {
		time.Sleep(errorPause)
	}
	return err
}

const errorPause = 50 * time.Millisecond

// workloadKeys names the run's -keys keys: the prefix, tag, a number.
func workloadKeys(cfg *config, tag string) []string {
	keys := make([]string, cfg.keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%s%d", cfg.prefix, tag, i)
	}
	return keys
}

// finalRead makes one read after the run (see finalOp).
func finalRead(cfg *config, rec *recorder, read func(context.Context, *clientv3.Client, *Op) error) error {
	return finalOp(cfg, rec, "read", read)
}

// finalOp makes one operation f after the run, through the members in
// turn until one answers (for up to -final-wait), recording each try as
// a final operation (none when rec is nil); call makes the request and
// fills op from its answer. Returns the last try's error.
func finalOp(cfg *config, rec *recorder, f string, call func(context.Context, *clientv3.Client, *Op) error) error {
	end := time.Now().Add(cfg.finalWait)
	for try := 0; ; try++ {
		ep := cfg.endpoints[try%len(cfg.endpoints)]
		cli, err := dial(ep)
		if err != nil {
			logf("final %s: %v", f, err)
			return err
		}
		op := Op{Proc: -1, Client: -1, Ep: ep, F: f, Final: true}
		err = timed(cfg.timeout, &op, func(ctx context.Context) error { return call(ctx, cli, &op) })
		cli.Close()
		if rec != nil {
			rec.add(op)
		}
		if err == nil {
			return nil
		}
		if time.Now().After(end) {
			logf("final %s: no member answered within %v", f, cfg.finalWait)
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

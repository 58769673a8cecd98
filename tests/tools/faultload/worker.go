package main

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"go.etcd.io/etcd/clientv3"
)

// worker is one client of a workload: pinned to one member, with a
// connection and a random source of its own, and its current proc
// number (a new one after each indeterminate outcome).
type worker struct {
	id   int
	ep   string
	cli  *clientv3.Client
	rng  *rand.Rand
	proc int
	cfg  *config
	rec  *recorder
}

// runWorkers runs body on each of the -clients workers at once and waits
// for them all; body returns when ctx ends.
func runWorkers(ctx context.Context, cfg *config, rec *recorder, body func(context.Context, *worker)) {
	var wg sync.WaitGroup
	for c := 0; c < cfg.clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			ep := cfg.endpoint(c)
			cli, err := dial(ep)
			if err != nil {
				logf("client %d: %v", c, err)
				return
			}
			defer cli.Close()
			body(ctx, &worker{id: c, ep: ep, cli: cli, proc: c, cfg: cfg, rec: rec,
				rng: rand.New(rand.NewSource(cfg.seed*7919 + int64(c)))})
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
	op.Proc, op.Client, op.Ep = w.proc, w.id, w.ep
	err := timed(d, op, call)
	w.rec.add(*op)
	if op.Type == typeInfo {
		w.proc += w.cfg.clients
	}
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

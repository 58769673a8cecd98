package main

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"go.etcd.io/etcd/clientv3"
)

// runRegister is the register workload: each client picks one of the
// keys at random and reads it (linearizable Range, or serializable with
// probability -serializable), writes it (Put of a value no one else
// writes), or compare-and-sets it (a Txn: if the value is the one this
// client last saw there, put a new value, else read the current value).
// After the run each key is read once more through any member that
// answers (the final reads the lost-write count rests on).
func runRegister(ctx context.Context, cfg *config, rec *recorder) {
	keys := make([]string, cfg.keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("%sr%d", cfg.prefix, i)
	}
	var wg sync.WaitGroup
	for c := 0; c < cfg.clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			registerClient(ctx, cfg, rec, c, keys)
		}(c)
	}
	wg.Wait()
	finalReads(cfg, rec, keys)
}

func registerClient(ctx context.Context, cfg *config, rec *recorder, c int, keys []string) {
	ep := cfg.endpoint(c)
	cli, err := dial(ep)
	if err != nil {
		logf("client %d: %v", c, err)
		return
	}
	defer cli.Close()
	rng := rand.New(rand.NewSource(cfg.seed*7919 + int64(c)))
	proc := c
	seen := map[string]string{} // the value this client last saw under each key
	for seq := 0; ctx.Err() == nil; seq++ {
		key := keys[rng.Intn(len(keys))]
		op := Op{Proc: proc, Client: c, Ep: ep, Key: key}
		r := rng.Float64()
		expect, known := seen[key]
		switch {
		case r < 0.4 || (r >= 0.7 && !known):
			op.F = "read"
			op.Serializable = rng.Float64() < cfg.serializable
		case r < 0.7:
			op.F = "write"
			op.Value = fmt.Sprintf("c%d-%d", c, seq)
		default:
			op.F = "cas"
			op.Expect = expect
			op.Value = fmt.Sprintf("c%d-%d", c, seq)
		}
		octx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
		op.Call = time.Now().UnixNano()
		switch op.F {
		case "read":
			var opts []clientv3.OpOption
			if op.Serializable {
				opts = append(opts, clientv3.WithSerializable())
			}
			resp, err := cli.Get(octx, key, opts...)
			op.Ret = time.Now().UnixNano()
			op.Type, op.Err = outcome(err)
			if err == nil {
				op.Rev = resp.Header.Revision
				if len(resp.Kvs) > 0 {
					op.Found, op.Read = true, string(resp.Kvs[0].Value)
				}
			}
		case "write":
			resp, err := cli.Put(octx, key, op.Value)
			op.Ret = time.Now().UnixNano()
			op.Type, op.Err = outcome(err)
			if err == nil {
				op.Rev = resp.Header.Revision
			}
		case "cas":
			resp, err := cli.Txn(octx).
				If(clientv3.Compare(clientv3.Value(key), "=", expect)).
				Then(clientv3.OpPut(key, op.Value)).
				Else(clientv3.OpGet(key)).
				Commit()
			op.Ret = time.Now().UnixNano()
			op.Type, op.Err = outcome(err)
			if err == nil {
				op.Rev = resp.Header.Revision
				op.Succeeded = resp.Succeeded
				if !resp.Succeeded && len(resp.Responses) == 1 {
					if rr := resp.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
						op.Found, op.Read = true, string(rr.Kvs[0].Value)
					}
				}
			}
		}
		cancel()
		rec.add(op)
		switch {
		case op.Type == typeInfo:
			proc += cfg.clients
			delete(seen, key)
		case op.Type != typeOK:
		case op.F == "write" || (op.F == "cas" && op.Succeeded):
			seen[key] = op.Value
		case op.Found:
			seen[key] = op.Read
		default:
			delete(seen, key)
		}
	}
}

// finalReads reads each key once more after the run, linearizably,
// through the members in turn until one answers (for up to -final-wait),
// so that the checker knows each key's last value.
func finalReads(cfg *config, rec *recorder, keys []string) {
	clients := map[string]*clientv3.Client{}
	defer func() {
		for _, cli := range clients {
			cli.Close()
		}
	}()
	for _, key := range keys {
		end := time.Now().Add(cfg.finalWait)
		for try := 0; ; try++ {
			ep := cfg.endpoints[try%len(cfg.endpoints)]
			cli := clients[ep]
			if cli == nil {
				var err error
				if cli, err = dial(ep); err != nil {
					logf("final read: %v", err)
					return
				}
				clients[ep] = cli
			}
			op := Op{Proc: -1, Client: -1, Ep: ep, Key: key, F: "read", Final: true}
			octx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
			op.Call = time.Now().UnixNano()
			resp, err := cli.Get(octx, key)
			op.Ret = time.Now().UnixNano()
			cancel()
			op.Type, op.Err = outcome(err)
			if err == nil {
				op.Rev = resp.Header.Revision
				if len(resp.Kvs) > 0 {
					op.Found, op.Read = true, string(resp.Kvs[0].Value)
				}
			}
			rec.add(op)
			if err == nil {
				break
			}
			if time.Now().After(end) {
				logf("final read of %s: no member answered within %v", key, cfg.finalWait)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

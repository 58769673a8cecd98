package main

import (
	"hash/maphash"
	"math"
	"math/bits"
	"math/rand"
	"sort"
	"time"
)

// The linearizability search: Wing and Gong's backtracking over the
// operations that may go next, with Lowe's memoisation of the
// configurations already explored (which operations are linearized, and
// the model's state after them). A configuration seen before led nowhere
// the first time, so it is not explored again.
//
// Operations come as call and return events in time order, kept in a
// doubly linked list. The search walks the list from its head: at a call
// it tries to linearize that operation next (the model must accept it in
// the current state); linearizing takes the call and its return out of
// the list and starts again from the head. Reaching a return means an
// operation that has returned is not linearized yet, so the last choice
// is undone (put back into the list) and the walk goes on after it.
// Indeterminate operations have no return event: they may be linearized
// anywhere after their call, or never; so when the walk runs off the end
// of the list, every operation left is one of those and the history is
// linearizable.

// linOp is what the search knows of one operation: its call and return
// (math.MaxInt64 for an indeterminate one).
type linOp struct {
	call, ret int64
}

// linModel is the object the operations act on: step says whether
// operation op may take effect in state s, and the state after it.
type linModel interface {
	step(s string, op int) (string, bool)
}

const (
	linOK = iota
	linBad
	linUnknown
)

// linResult says what the search found. For a history that is not
// linearizable it describes the furthest the search got: how many
// operations it linearized, the state there, the operation that had
// returned but could not be placed, and the last few placed before it.
type linResult struct {
	verdict   int
	steps     int64
	best      int
	bestState string
	blocker   int
	lastLin   []int
}

type linEntry struct {
	op         int
	call       bool
	match      *linEntry // a call's return (nil: indeterminate)
	prev, next *linEntry
}

func (e *linEntry) lift() {
	e.prev.next = e.next
	if e.next != nil {
		e.next.prev = e.prev
	}
	if m := e.match; m != nil {
		m.prev.next = m.next
		if m.next != nil {
			m.next.prev = m.prev
		}
	}
}

func (e *linEntry) unlift() {
	if m := e.match; m != nil {
		m.prev.next = m
		if m.next != nil {
			m.next.prev = m
		}
	}
	e.prev.next = e
	if e.next != nil {
		e.next.prev = e
	}
}

// linSet is the set of linearized operations with what the memo needs
// cheaply: a Zobrist hash (xor of a random word per member), the count,
// and low, the length of the prefix of operations all in the set.
type linSet struct {
	bits  []uint64
	zob   []uint64
	hash  uint64
	count int
	low   int
}

func (s *linSet) has(i int) bool { return s.bits[i>>6]&(1<<(uint(i)&63)) != 0 }

func (s *linSet) add(i int) {
	s.bits[i>>6] |= 1 << (uint(i) & 63)
	s.hash ^= s.zob[i]
	s.count++
	for s.low < len(s.zob) && s.has(s.low) {
		s.low++
	}
}

func (s *linSet) remove(i int) {
	s.bits[i>>6] &^= 1 << (uint(i) & 63)
	s.hash ^= s.zob[i]
	s.count--
	if i < s.low {
		s.low = i
	}
}

// extra lists the members above low (count-low of them).
func (s *linSet) extra() []int32 {
	want := s.count - s.low
	out := make([]int32, 0, want)
	first := s.low + 1
	for w := first >> 6; len(out) < want; w++ {
		word := s.bits[w]
		if w == first>>6 {
			word &^= 1<<(uint(first)&63) - 1
		}
		for ; word != 0; word &= word - 1 {
			out = append(out, int32(w<<6+bits.TrailingZeros64(word)))
		}
	}
	return out
}

type linMemo struct {
	low, count int
	extra      []int32
	state      string
}

// linearizable searches for a linearization of ops under m, giving up
// (linUnknown) after maxSteps steps or at deadline.
func linearizable(ops []linOp, m linModel, maxSteps int64, deadline time.Time) linResult {
	n := len(ops)
	type event struct {
		t    int64
		call bool
		e    *linEntry
	}
	events := make([]event, 0, 2*n)
	for i := range ops {
		c := &linEntry{op: i, call: true}
		if ops[i].ret != math.MaxInt64 {
			c.match = &linEntry{op: i}
			events = append(events, event{ops[i].ret, false, c.match})
		}
		events = append(events, event{ops[i].call, true, c})
	}
	// calls before returns at the same instant: such operations count as
	// concurrent, the more permissive reading
	sort.SliceStable(events, func(a, b int) bool {
		if events[a].t != events[b].t {
			return events[a].t < events[b].t
		}
		return events[a].call && !events[b].call
	})
	head := &linEntry{op: -1}
	prev := head
	for _, ev := range events {
		ev.e.prev = prev
		prev.next = ev.e
		prev = ev.e
	}

	set := linSet{bits: make([]uint64, n/64+1), zob: make([]uint64, n)}
	rng := rand.New(rand.NewSource(1))
	for i := range set.zob {
		set.zob[i] = rng.Uint64()
	}
	seed := maphash.MakeSeed()
	stateHash := func(s string) uint64 {
		var h maphash.Hash
		h.SetSeed(seed)
		h.WriteString(s)
		return h.Sum64()
	}
	memo := map[uint64][]linMemo{}
	seen := func(state string) bool {
		for _, c := range memo[set.hash^stateHash(state)] {
			if c.low != set.low || c.count != set.count || c.state != state {
				continue
			}
			all := true
			for _, i := range c.extra {
				if !set.has(int(i)) {
					all = false
					break
				}
			}
			if all {
				return true
			}
		}
		return false
	}

	type frame struct {
		e     *linEntry
		state string
	}
	var stack []frame
	res := linResult{best: -1, blocker: -1}
	state := ""
	e := head.next
	for head.next != nil {
		res.steps++
		if res.steps&1023 == 0 && (res.steps > maxSteps || time.Now().After(deadline)) {
			res.verdict = linUnknown
			return res
		}
		if e == nil {
			// only indeterminate calls are left; they need not happen
			res.verdict = linOK
			return res
		}
		if e.call {
			if next, ok := m.step(state, e.op); ok {
				set.add(e.op)
				if !seen(next) {
					h := set.hash ^ stateHash(next)
					memo[h] = append(memo[h], linMemo{set.low, set.count, set.extra(), next})
					stack = append(stack, frame{e, state})
					state = next
					e.lift()
					e = head.next
					continue
				}
				set.remove(e.op)
			}
			e = e.next
			continue
		}
		// a returned operation is not linearized: undo the last choice
		if set.count > res.best {
			res.best = set.count
			res.bestState = state
			res.blocker = e.op
			res.lastLin = res.lastLin[:0]
			for i := len(stack) - 1; i >= 0 && len(res.lastLin) < 6; i-- {
				res.lastLin = append(res.lastLin, stack[i].e.op)
			}
		}
		if len(stack) == 0 {
			res.verdict = linBad
			return res
		}
		top := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		e = top.e
		state = top.state
		set.remove(e.op)
		e.unlift()
		e = e.next
	}
	res.verdict = linOK
	return res
}

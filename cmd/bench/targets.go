package main

import (
	"fmt"
	"io"
	"math"
	"time"
)

// writeTargets writes the targets table.
func (r *report) writeTargets(w io.Writer) { r.targetRows().write(w) }

// targetRows checks the targets against the measurements: a table whose
// first row is the header, then one row per target (target, measured, result).
// targetList (targetlist.go) names every target it can check; the doc's table
// is tested against that list.
func (r *report) targetRows() *table {
	tb := &table{}
	tb.add("target (from the issue)", "measured", "result")
	verdict := func(ok bool, measured bool) string {
		switch {
		case !measured:
			return "not measured"
		case ok:
			return "met"
		}
		return "**missed**"
	}
	for _, sc := range r.scenarios {
		if sc.kind == openKind && (sc.rate == 1000 || sc.rate == 2000) {
			p50, p99 := sc.addedRatio(0.50, false), sc.addedRatio(0.99, false)
			tb.add(fmt.Sprintf("added latency p50 ≤ 1.2x baseline's at %d RPS", sc.rate), ratioOrNA(p50), verdict(p50 <= 1.2, !math.IsNaN(p50)))
			tb.add(fmt.Sprintf("added latency p99 ≤ 1.5x baseline's at %d RPS", sc.rate), ratioOrNA(p99), verdict(p99 <= 1.5, !math.IsNaN(p99)))
		}
		if sc.kind == streamKind {
			p50, p99 := sc.addedRatio(0.50, true), sc.addedRatio(0.99, true)
			tb.add(fmt.Sprintf("streaming added time to first chunk p50 ≤ 1.2x baseline's at %d streams/s", sc.rate), ratioOrNA(p50), verdict(p50 <= 1.2, !math.IsNaN(p50)))
			tb.add(fmt.Sprintf("streaming added time to first chunk p99 ≤ 1.5x baseline's at %d streams/s", sc.rate), ratioOrNA(p99), verdict(p99 <= 1.5, !math.IsNaN(p99)))
		}
		if sc.kind == closedKind {
			v := sc.throughput(gateway) / sc.throughput(baseline)
			tb.add("closed-loop throughput ≥ 0.8x baseline's", fmt.Sprintf("%.2fx", v), verdict(v >= 0.8, sc.throughput(baseline) > 0))
		}
	}
	// CPU per request over every non-streaming open-loop run.
	var gc, bc time.Duration
	var gn, bn int
	for _, sc := range r.scenarios {
		if sc.kind == openKind {
			gc, gn = gc+sc.per[gateway].cpu, gn+sc.per[gateway].requests
			bc, bn = bc+sc.per[baseline].cpu, bn+sc.per[baseline].requests
		}
	}
	if gn > 0 && bn > 0 && bc > 0 {
		v := (float64(gc) / float64(gn)) / (float64(bc) / float64(bn))
		tb.add("CPU per request ≤ 1.5x baseline's (all open-loop runs)", fmt.Sprintf("%.2fx", v), verdict(v <= 1.5, true))
	}
	r.totalCPUTarget(tb, verdict, openKind, "non-stream, all open-loop runs", 1.15)
	r.totalCPUTarget(tb, verdict, streamKind, "stream, all stream runs", 1.25)
	if h, ok := r.hold[gateway]; ok {
		peak := max(r.peakFinal[gateway], h.peakRSS)
		tb.add(fmt.Sprintf("gateway peak RSS < 150 MiB with %d open streams", r.holdN),
			fmt.Sprintf("%s MiB (%d streams open at peak)", mib(peak), h.peakOpen),
			verdict(peak < 150<<20 && h.peakOpen >= r.holdN, true))
	}
	if r.hanging != nil {
		r.hanging.writeTargets(tb, verdict)
	}
	if r.tail != nil {
		r.tail.writeTargets(tb, verdict)
	}
	if r.replicas != nil {
		r.replicas.writeTargets(tb, verdict)
	}
	if r.translate != nil {
		r.translate.writeTargets(tb, verdict)
	}
	if r.budget != nil {
		r.budget.writeTargets(tb, verdict)
	}
	if r.tracing != nil {
		r.tracing.writeTargets(tb, verdict)
	}
	gwErrs := sumErrs(r.hold[gateway].errs)
	for _, sc := range r.scenarios {
		gwErrs += sc.per[gateway].errors()
	}
	if r.hanging != nil {
		gwErrs += sumErrs(r.hanging.errs())
	}
	if r.tail != nil {
		gwErrs += sumErrs(r.tail.errs())
	}
	if r.replicas != nil {
		gwErrs += sumErrs(r.replicas.errs())
	}
	if r.translate != nil {
		gwErrs += sumErrs(r.translate.errs())
	}
	if r.budget != nil {
		gwErrs += sumErrs(r.budget.errs())
	}
	if r.tracing != nil {
		gwErrs += sumErrs(r.tracing.errs())
	}
	lost := r.records["gateway_report_dropped_total"]
	tb.add("zero errors (gateway requests; records dropped)", fmt.Sprintf("%d errors; %.0f records dropped", gwErrs, lost),
		verdict(gwErrs == 0 && lost == 0, true))
	return tb
}

// totalCPUTarget checks the gateway's CPU plus its Postgres cluster's per
// request, over every run of one kind, against the bare proxy's CPU; the
// Postgres share is reported alone beside it.
func (r *report) totalCPUTarget(tb *table, verdict func(ok, measured bool) string, kind scenarioKind, what string, limit float64) {
	var gc, pc, bc time.Duration
	var gn, bn int
	for _, sc := range r.scenarios {
		g, b := sc.per[gateway], sc.per[baseline]
		if sc.kind != kind || !g.cpuKnown || !b.cpuKnown {
			continue
		}
		gc, pc, gn = gc+g.cpu, pc+g.pgCPU, gn+g.requests
		bc, bn = bc+b.cpu, bn+b.requests
	}
	if gn == 0 || bn == 0 || bc == 0 {
		return
	}
	perReq := func(d time.Duration, n int) float64 { return float64(d) / 1e3 / float64(n) }
	v := (perReq(gc, gn) + perReq(pc, gn)) / perReq(bc, bn)
	tb.add(fmt.Sprintf("CPU per request with its Postgres ≤ %.2fx baseline's (%s)", limit, what),
		fmt.Sprintf("%.2fx (gateway %.0f µs + Postgres %.0f µs against %.0f µs)", v, perReq(gc, gn), perReq(pc, gn), perReq(bc, bn)),
		verdict(v <= limit, true))
}

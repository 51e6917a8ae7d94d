// Package retention bounds what a tool keeps of a long output, so that the
// model is shown a bounded result, and says exactly how much was left out.
//
// It owns three things:
//
//   - Bounding a byte stream ([TextRetainer]): keep the first bytes
//     ([Head]), the last bytes ([Tail]) or both ([HeadTail]) within a byte
//     budget, in memory that stays proportional to the budget however much
//     is written, whatever the chunking of the writes. A cut never splits a
//     UTF-8 code point: it moves to the nearest code point boundary that
//     keeps the result within the budget.
//   - Bounding an ordered stream of logical units such as paths or matches
//     ([ItemRetainer]).
//   - Exact omission accounting ([Omitted]: bytes, lines and items dropped)
//     and the standard notice that reports it ([FormatNotice]), for example
//     "[1,234 bytes (56 lines) omitted]".
//
// It does not do I/O, write spill files, log, start goroutines or keep
// global state, and it does not decide how a tool tells the model to recover
// what was omitted ("full output: <file>", "narrow the pattern", …): those
// belong to the services and tools that use it, which put their own words
// around the notice.
//
// Retainers are not safe for concurrent use; a caller that writes from
// several goroutines serializes the calls itself.
package retention

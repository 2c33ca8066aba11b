// Command go-duration-cases writes ../go_parse_duration.json: what Go's time.ParseDuration says
// of each case, so the Rust grammar in common/src/duration.rs is tested against Go itself.
// The cases are Go's own (parseDurationTests and parseDurationErrorTests in src/time/time_test.go)
// plus retention-specific ones. Regenerate with `go run .` in this folder.
package main

import (
	"encoding/json"
	"os"
	"time"
)

var cases = []string{
	// Go's accepted cases.
	"0", "5s", "30s", "1478s",
	"-5s", "+5s", "-0", "+0",
	"5.0s", "5.6s", "5.s", ".5s", "1.0s", "1.00s", "1.004s", "1.0040s", "100.00100s",
	"10ns", "11us", "12µs", "12μs", "13ms", "14s", "15m", "16h",
	"3h30m", "10.5s4m", "-2m3.4s", "1h2m3s4ms5us6ns", "39h9m14.425s",
	"52763797000ns", "0.3333333333333333333h", "9007199254740993ns",
	"9223372036854775807ns", "9223372036854775.807us", "9223372036s854ms775us807ns",
	"-9223372036854775808ns", "-9223372036854775.808us", "-9223372036s854ms775us808ns",
	"-2562047h47m16.854775808s", "0.100000000000000000000h", "0.830103483285477580700h",
	// Go's rejected cases.
	"", "3", "-", "s", ".", "-.", ".s", "+.s", "1d", "\x85\x85", "\xffff", "hello \xffff world",
	"\uFFFD", "\uFFFD hello \uFFFD world",
	"9223372036854775810ns", "9223372036854775808ns", "-9223372036854775809ns",
	"9223372036854776us", "3000000h", "9223372036854775.808us", "9223372036854ms775us808ns",
	// What retention users write, right and wrong.
	"1.5h", "300ms", "0s", "36h", "1h30m10s", "720h", "2562047h47m16.854775807s",
	"2562047h47m16.854775808s", "1w", "2 weeks", "1 h", " 1h", "1h ", "1H", "1hr", "10 minutes",
	"1e3s", "0x10s", "1h-5m", "--1s", "+-1s", "1.2.3s", "١s", "5", "soon",
}

type result struct {
	In    string `json:"in"`
	Ok    bool   `json:"ok"`
	Nanos int64  `json:"nanos"`
}

func main() {
	results := make([]result, 0, len(cases))
	for _, in := range cases {
		d, err := time.ParseDuration(in)
		results = append(results, result{In: in, Ok: err == nil, Nanos: int64(d)})
	}
	out, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile("../go_parse_duration.json", append(out, '\n'), 0o644); err != nil {
		panic(err)
	}
}

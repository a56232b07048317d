package server

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/srjn45/rdq/proto/rdqv1"
)

// A series whose older buckets may still be missing counts says from when
// they are complete over REST; a complete one says nothing.
func TestRenderGetSeriesSaysWhereCountsArePartial(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	partial := start.Add(7 * time.Minute)
	res := &rdqv1.GetSeriesResponse{Start: timestamppb.New(start), WidthSeconds: 60, PartialUntil: timestamppb.New(partial)}
	out, err := renderGetSeries(nil, res)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.(map[string]any)["partial_until"]; got != partial {
		t.Errorf("partial_until = %v, want %v", got, partial)
	}
	res.PartialUntil = nil
	out, err = renderGetSeries(nil, res)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := out.(map[string]any)["partial_until"]; ok {
		t.Errorf("a complete series has partial_until %v", got)
	}
}

package harness

import (
	"fmt"
	"math"
	"slices"
)

// Median returns the median of xs (the mean of the two middle values for an
// even count) and NaN for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Measured builds a row from repetitions, taking the median.
func Measured(section, name, metric, unit string, reps []float64, note string) Row {
	return Row{Section: section, Name: name, Metric: metric, Unit: unit,
		Value: Median(reps), Reps: reps, Note: note}
}

// Failed builds a row for a measurement that could not be taken.
func Failed(section, name, metric string, err error) Row {
	return Row{Section: section, Name: name, Metric: metric, Err: err.Error()}
}

// Ratio builds a row num/den from two rows of the same run. It fails (a row
// with Err) when either side failed, so a ratio is never made up from a
// missing measurement.
func Ratio(section, name string, num, den Row, note string) Row {
	metric := fmt.Sprintf("ratio %s / %s", num.Name, den.Name)
	switch {
	case num.Err != "":
		return Row{Section: section, Name: name, Metric: metric, Err: "numerator failed: " + num.Err}
	case den.Err != "":
		return Row{Section: section, Name: name, Metric: metric, Err: "denominator failed: " + den.Err}
	case den.Value == 0 || math.IsNaN(den.Value) || math.IsNaN(num.Value):
		return Row{Section: section, Name: name, Metric: metric, Err: "no value"}
	}
	return Row{Section: section, Name: name, Metric: metric, Unit: "x", Value: num.Value / den.Value, Note: note}
}

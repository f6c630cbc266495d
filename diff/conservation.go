package diff

import "math"

// Conservation checks that a quantity is conserved through one run: what
// came in equals what consumers of the outputs see plus what was
// rejected (the runbook's 575 = 525 + 50: transaction amounts in, regional
// totals out, the unknown region's amount rejected).
type Conservation struct {
	// Run names the run ("old", "new").
	Run string `json:"run"`
	// Field is the quantity: IN=OUT, the input field and the output field.
	Field    string  `json:"field"`
	Input    float64 `json:"input"`
	Accepted float64 `json:"accepted"`
	Rejected float64 `json:"rejected"`
	Balanced bool    `json:"balanced"`
}

// Conserve checks conservation for the old run (newSide false) or the new
// one of a report: input and rejected are the sums of the input field
// over the elements the run read and rejected; accepted adds the output
// field over every output's consumer-visible rows (Report's
// VisibleReport sums).
func Conserve(rep *Report, newSide bool, run, inField, outField string, input, rejected float64) Conservation {
	c := Conservation{Run: run, Field: inField + "=" + outField, Input: input, Rejected: rejected}
	for _, o := range rep.Outputs {
		sums := o.Visible.SumsOld
		if newSide {
			sums = o.Visible.SumsNew
		}
		c.Accepted += sums[outField]
	}
	c.Balanced = math.Abs(c.Input-(c.Accepted+c.Rejected)) <= 1e-9*math.Max(1, math.Abs(c.Input))
	return c
}

package agent

import (
	"context"
	"testing"
)

// plainModel is a model with no optional capability.
type plainModel struct{}

func (plainModel) Stream(context.Context, *Request, Sink) (*Response, error) { return &Response{}, nil }

// seeingModel takes image parts.
type seeingModel struct{ plainModel }

func (seeingModel) TakesImages() bool { return true }

// TestWrappersKeepImageInput: the wrappers every configured model goes
// through (providers: Retrying around Traced) report what the model under
// them takes; one that hid ImageInput kept every image from the model.
func TestWrappersKeepImageInput(t *testing.T) {
	t.Parallel()
	for name, m := range map[string]Model{
		"Traced":          Traced(seeingModel{}, "openai", "gpt"),
		"Retrying":        Retrying(seeingModel{}, RetryPolicy{}),
		"RetryingTraced":  Retrying(Traced(seeingModel{}, "openai", "gpt"), RetryPolicy{}),
		"TracedRetrying":  Traced(Retrying(seeingModel{}, RetryPolicy{}), "openai", "gpt"),
		"UnwrappedSeeing": seeingModel{},
	} {
		if !TakesImages(m) {
			t.Errorf("%s: TakesImages = false, want the wrapped model's true", name)
		}
	}
	for name, m := range map[string]Model{
		"Traced":         Traced(plainModel{}, "openai", "gpt"),
		"RetryingTraced": Retrying(Traced(plainModel{}, "openai", "gpt"), RetryPolicy{}),
	} {
		if TakesImages(m) {
			t.Errorf("%s: TakesImages = true for a model that takes no images", name)
		}
	}
}

package runner

import (
	"fmt"

	"drover/internal/rules"
	"drover/internal/sandbox"
)

// checkImages refuses an image allow-list the hub would refuse at the
// hello, or one on a sandbox that runs no images.
func checkImages(kind string, images []string) error {
	if len(images) == 0 {
		return nil
	}
	if kind != sandbox.KindDocker && kind != sandbox.KindPodman {
		return fmt.Errorf("images (--images) are for --sandbox docker or podman; a %s sandbox runs no image", kind)
	}
	if err := rules.CheckImagePatterns(images); err != nil {
		return fmt.Errorf("--images: %w", err)
	}
	return nil
}

// imageRefusal says why this runner will not run a job naming image (""
// when it will): the hub offers such a job only to a runner whose
// allow-list matches, and the runner holds it to the same rule, so an
// image never reaches the engine unchecked.
func (r *Runner) imageRefusal(image string) string {
	if image == "" {
		return ""
	}
	if err := rules.CheckImage(image); err != nil {
		return fmt.Sprintf("this runner does not run the job's image: %v", err)
	}
	if !rules.ImageAllowed(image, r.cfg.Images) {
		return fmt.Sprintf("this runner does not offer image %s (its --images allow-list does not match it); it runs no job in another image", image)
	}
	return ""
}

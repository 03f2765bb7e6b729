// Command infra is the Strata AWS CDK app: `cdk synth` / `cdk deploy` at
// the repository root run it (cdk.json: "cd infra && go run ."). Settings
// come from the CDK context; see README.md.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/stratamq/strata/infra/stack"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	if _, err := stack.NewFromContext(app); err != nil {
		fmt.Fprintln(os.Stderr, "strata infra:", err)
		jsii.Close()
		os.Exit(1)
	}
	app.Synth(nil)
}

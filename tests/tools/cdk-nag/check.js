// cdk-nag's AwsSolutions pack over CloudFormation templates, as a CDK team runs it on the
// templates it includes (aws-cdk-lib/cloudformation-include):
//
//   node tests/tools/cdk-nag/check.js TEMPLATE...
//
// Two releases, each reading acknowledgements its own way:
// - 2.x reads each resource's `Metadata.cdk_nag.rules_to_suppress` itself;
// - 3.x reads `Validations.of(resource).acknowledge(...)`, which this script calls for each
//   entry of the same metadata (`id[finding]` for each `applies_to` finding, the rule's id
//   for a `CdkNagValidationFailure`), as 3.x's migration guide maps them.
//
// Prints one line per unacknowledged finding (`release<TAB>level<TAB>rule<TAB>template<TAB>
// resource`) and exits 1 when there is any; exits 2 when a pack cannot run (an invalid
// suppression is an error of 2.x).
'use strict';
const fs = require('fs');
const path = require('path');

const templates = process.argv.slice(2);
if (templates.length === 0) {
  console.error('usage: check.js TEMPLATE...');
  process.exit(2);
}

const findings = [];

function include(cdk, app, file, index) {
  const { Stack } = cdk;
  const { CfnInclude } = require('aws-cdk-lib/cloudformation-include');
  const stack = new Stack(app, `T${index}`);
  const template = new CfnInclude(stack, 'Template', { templateFile: file });
  return { stack, template };
}

// The logical id of a construct path `T<i>/Template/<LogicalId>[/...]`.
function located(constructPath) {
  const [stack, , logicalId] = constructPath.replace(/^\//, '').split('/');
  const index = Number(stack.slice(1));
  return { template: templates[index], resource: logicalId };
}

function runV2() {
  const cdk = require('aws-cdk-lib');
  const { AwsSolutionsChecks } = require('cdk-nag-v2');
  const app = new cdk.App();
  templates.forEach((file, i) => {
    const { stack } = include(cdk, app, file, i);
    cdk.Aspects.of(stack).add(new AwsSolutionsChecks());
  });
  const assembly = app.synth();
  templates.forEach((_, i) => {
    const artifact = assembly.getStackArtifact(`T${i}`);
    for (const message of artifact.messages) {
      if (message.level === 'info') continue;
      const rule = String(message.entry.data).split(':')[0];
      const at = located(message.id);
      findings.push(['cdk-nag 2.x', message.level, rule, at.template, at.resource]);
    }
  });
}

function runV3() {
  const cdk = require('aws-cdk-lib');
  const { AwsSolutionsChecks } = require('cdk-nag');
  const app = new cdk.App();
  templates.forEach((file, i) => {
    const { template } = include(cdk, app, file, i);
    const resources = JSON.parse(fs.readFileSync(file, 'utf8')).Resources || {};
    for (const [logicalId, resource] of Object.entries(resources)) {
      const rules = resource.Metadata?.cdk_nag?.rules_to_suppress ?? [];
      for (const rule of rules) {
        // 3.x names a rule that failed to run by the rule's id; 2.x's acknowledgement of
        // such a failure is `CdkNagValidationFailure` applying to that id (3.x migration
        // table).
        const ids =
          rule.id === 'CdkNagValidationFailure'
            ? rule.applies_to ?? []
            : rule.applies_to
              ? rule.applies_to.map((f) => `${rule.id}[${f}]`)
              : [rule.id];
        for (const id of ids) {
          cdk.Validations.of(template.getResource(logicalId)).acknowledge({ id, reason: rule.reason });
        }
      }
    }
  });
  const report = new AwsSolutionsChecks(app).validateScope(app);
  for (const violation of report.violations) {
    for (const resource of violation.violatingResources) {
      const at = located(resource.constructPath);
      findings.push(['cdk-nag 3.x', violation.severity, violation.ruleName, at.template, at.resource]);
    }
  }
}

try {
  for (const file of templates) {
    if (!fs.existsSync(file)) throw new Error(`no such template: ${file}`);
  }
  runV2();
  runV3();
} catch (error) {
  console.error(`cdk-nag could not check the templates: ${error.stack || error}`);
  process.exit(2);
}

for (const f of findings) {
  f[3] = path.relative(process.cwd(), f[3]) || f[3];
  console.log(f.join('\t'));
}
console.error(
  `cdk-nag AwsSolutions (2.x and 3.x): ${templates.length} template(s), ${findings.length} unacknowledged finding(s)`
);
process.exit(findings.length === 0 ? 0 : 1);

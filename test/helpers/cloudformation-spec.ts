/**
 * Offline validation of a CloudFormation template against AWS's own resource specification:
 * `@aws-cdk/aws-service-spec` (the CloudFormation registry schemas of every resource type as one
 * database), read with the loader and types of `@aws-cdk/service-spec-types`. What it proves:
 *
 * * every resource type exists (`Custom::*` and `AWS::CloudFormation::CustomResource` take any
 *   properties but a `ServiceToken`);
 * * every property name exists for its type, nested property types included;
 * * required properties are present;
 * * a literal value has the property's primitive type (string, integer, number, boolean, date,
 *   JSON, object, list, map) and one of its allowed values where the specification lists them;
 * * an intrinsic function (`Ref`, `Fn::GetAtt`, `Fn::If`, `Fn::Sub`, `Fn::Join`, ...) is accepted
 *   where a value is expected; `Fn::If` has both branches checked; `Ref` names a parameter, a
 *   resource or a pseudo parameter; `Fn::GetAtt` names a resource and an attribute its type has;
 *   `DependsOn` and `Condition` name what exists.
 *
 * Scalars are read as CloudFormation reads them: a number or a boolean is accepted where a string
 * is expected, and a numeric string where a number is (CloudFormation converts both).
 *
 * Every problem names the stage, the resource and the property path.
 */
import { loadAwsServiceSpec } from '@aws-cdk/aws-service-spec';
import type { PropertyType, ResourceProperties, SpecDatabase } from '@aws-cdk/service-spec-types';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

/** The parts of a template the check reads. */
export interface CloudFormationTemplate {
  readonly Parameters?: Record<string, unknown>;
  readonly Conditions?: Record<string, unknown>;
  readonly Resources: Record<string, { readonly Type: string; readonly Properties?: unknown; readonly [key: string]: unknown }>;
}

let loaded: Promise<SpecDatabase> | undefined;

/** The specification database (loaded once per process: a few seconds). */
export function loadSpecification(): Promise<SpecDatabase> {
  loaded ??= loadAwsServiceSpec();
  return loaded;
}

const PSEUDO_PARAMETERS = new Set([
  'AWS::AccountId',
  'AWS::NotificationARNs',
  'AWS::NoValue',
  'AWS::Partition',
  'AWS::Region',
  'AWS::StackId',
  'AWS::StackName',
  'AWS::URLSuffix',
]);
/** Intrinsic functions that may stand where a property value is expected. */
const VALUE_FUNCTIONS = new Set([
  'Ref',
  'Fn::GetAtt',
  'Fn::If',
  'Fn::Sub',
  'Fn::Join',
  'Fn::Select',
  'Fn::Split',
  'Fn::ImportValue',
  'Fn::FindInMap',
  'Fn::Base64',
  'Fn::GetAZs',
  'Fn::Cidr',
  'Fn::Length',
  'Fn::ToJsonString',
  'Fn::Transform',
]);
const RESOURCE_KEYS = new Set([
  'Type',
  'Properties',
  'DependsOn',
  'Condition',
  'Metadata',
  'DeletionPolicy',
  'UpdateReplacePolicy',
  'UpdatePolicy',
  'CreationPolicy',
]);

const isObject = (value: unknown): value is JsonObject => typeof value === 'object' && value !== null && !Array.isArray(value);
/** The function name when `value` is an intrinsic function call (one key, `Ref` or `Fn::*`). */
function intrinsic(value: unknown): string | undefined {
  if (!isObject(value)) return undefined;
  const keys = Object.keys(value);
  return keys.length === 1 && (keys[0] === 'Ref' || keys[0]?.startsWith('Fn::')) ? keys[0] : undefined;
}
const isCustom = (type: string) => type.startsWith('Custom::') || type === 'AWS::CloudFormation::CustomResource';

/** Checks `template` (the packaged stage `stage`); returns one line per problem, none when valid. */
export function validateTemplate(template: CloudFormationTemplate, spec: SpecDatabase, stage: string): string[] {
  const problems: string[] = [];
  const resources = template.Resources ?? {};
  const parameters = new Set(Object.keys(template.Parameters ?? {}));
  const conditions = new Set(Object.keys(template.Conditions ?? {}));
  const specOf = (type: string) => (isCustom(type) ? undefined : spec.lookup('resource', 'cloudFormationType', 'equals', type)[0]);

  for (const [id, resource] of Object.entries(resources)) {
    const report = (path: string, message: string) =>
      problems.push(`stage ${stage}, resource ${id} (${resource.Type})${path === '' ? '' : `, property ${path}`}: ${message}`);

    /** A reference made inside a value: `Ref`, `Fn::GetAtt`, `${...}` of `Fn::Sub`. */
    const checkReferences = (value: unknown, path: string, subVariables: ReadonlySet<string> = new Set()): void => {
      if (Array.isArray(value)) {
        value.forEach((item, index) => checkReferences(item, `${path}[${index}]`, subVariables));
        return;
      }
      if (!isObject(value)) return;
      const fn = intrinsic(value);
      if (fn === 'Ref') {
        const name = value.Ref;
        if (typeof name !== 'string') report(path, `Ref takes a name, got ${JSON.stringify(name)}`);
        else if (!PSEUDO_PARAMETERS.has(name) && !parameters.has(name) && !(name in resources))
          report(path, `Ref to ${name}, which is neither a parameter nor a resource`);
        return;
      }
      if (fn === 'Fn::GetAtt') {
        const raw = value['Fn::GetAtt'];
        const [target, attribute] =
          typeof raw === 'string' ? [raw.slice(0, raw.indexOf('.')), raw.slice(raw.indexOf('.') + 1)] : (raw as [Json, Json]);
        checkAttribute(target, attribute, path);
        return;
      }
      if (fn === 'Fn::Sub') {
        const raw = value['Fn::Sub'];
        const [text, variables] = typeof raw === 'string' ? [raw, {}] : ((raw as [Json, Json]) ?? []);
        const own = new Set(isObject(variables) ? Object.keys(variables) : []);
        if (isObject(variables)) checkReferences(variables, `${path}.Fn::Sub`);
        if (typeof text === 'string') {
          for (const match of text.matchAll(/\$\{([^!}][^}]*)\}/g)) {
            const name = (match[1] as string).trim();
            if (own.has(name) || PSEUDO_PARAMETERS.has(name) || parameters.has(name) || name in resources) continue;
            const dot = name.indexOf('.');
            if (dot > 0 && name.slice(0, dot) in resources) checkAttribute(name.slice(0, dot), name.slice(dot + 1), `${path}.Fn::Sub`);
            else report(`${path}.Fn::Sub`, `\${${name}} names no parameter, resource or variable`);
          }
        }
        return;
      }
      if (fn === 'Fn::If' && !conditions.has(String((value['Fn::If'] as Json[])[0]))) {
        report(path, `Fn::If names the condition ${JSON.stringify((value['Fn::If'] as Json[])[0])}, which the template does not declare`);
      }
      for (const [key, inner] of Object.entries(value)) checkReferences(inner, `${path}.${key}`, subVariables);
    };

    const checkAttribute = (target: Json, attribute: Json, path: string): void => {
      if (typeof target !== 'string' || !(target in resources)) {
        report(path, `Fn::GetAtt names ${JSON.stringify(target)}, which is not a resource of the template`);
        return;
      }
      const targetType = resources[target]?.Type as string;
      const targetSpec = specOf(targetType);
      if (targetSpec === undefined) return; // a custom resource has whatever attributes it returns
      if (typeof attribute !== 'string') return; // computed (e.g. Ref inside): CloudFormation checks it
      if (!(attribute in targetSpec.attributes)) {
        report(
          path,
          `Fn::GetAtt ${target}.${attribute}: ${targetType} has no attribute ${attribute} (it has ${Object.keys(targetSpec.attributes).join(', ') || 'none'})`,
        );
      }
    };

    /** Does `value` fit `type`? Returns the reasons it does not (empty: it fits). */
    const mismatch = (value: unknown, type: PropertyType, path: string): Array<[string, string]> => {
      const fn = intrinsic(value);
      if (fn !== undefined) {
        if (!VALUE_FUNCTIONS.has(fn)) return [[path, `${fn} cannot stand for a value`]];
        if (fn === 'Fn::If') {
          const branches = (value as JsonObject)['Fn::If'];
          if (!Array.isArray(branches) || branches.length !== 3) return [[path, 'Fn::If takes [condition, value if true, value if false]']];
          return [1, 2].flatMap((at) =>
            isObject(branches[at]) && (branches[at] as JsonObject).Ref === 'AWS::NoValue'
              ? []
              : mismatch(branches[at], type, `${path}.Fn::If[${at}]`),
          );
        }
        return []; // its result is known at deployment only
      }
      switch (type.type) {
        case 'string':
          if (typeof value === 'number' || typeof value === 'boolean')
            return type.allowedValues ? enumCheck(String(value), type.allowedValues, path) : [];
          if (typeof value !== 'string') return [[path, `expects a string, got ${describe(value)}`]];
          return type.allowedValues ? enumCheck(value, type.allowedValues, path) : [];
        case 'integer':
        case 'number': {
          const number = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : Number.NaN;
          if (Number.isNaN(number))
            return [[path, `expects ${type.type === 'integer' ? 'an integer' : 'a number'}, got ${describe(value)}`]];
          if (type.type === 'integer' && !Number.isInteger(number)) return [[path, `expects an integer, got ${describe(value)}`]];
          if (type.type === 'integer' && type.allowedValues && !type.allowedValues.includes(number)) {
            return [[path, `${number} is not one of the allowed values ${type.allowedValues.join(', ')}`]];
          }
          return [];
        }
        case 'boolean':
          return typeof value === 'boolean' || value === 'true' || value === 'false'
            ? []
            : [[path, `expects a boolean, got ${describe(value)}`]];
        case 'date-time':
          return typeof value === 'string' ? [] : [[path, `expects a date-time string, got ${describe(value)}`]];
        case 'json':
          return [];
        case 'null':
          return value === null ? [] : [[path, `expects null, got ${describe(value)}`]];
        case 'tag':
          return isObject(value)
            ? checkProperties(
                value,
                { Key: { type: { type: 'string' }, required: true }, Value: { type: { type: 'string' }, required: true } },
                path,
              )
            : [[path, `expects a tag {Key, Value}, got ${describe(value)}`]];
        case 'array':
          if (!Array.isArray(value)) return [[path, `expects a list, got ${describe(value)}`]];
          return value.flatMap((item, index) => mismatch(item, type.element, `${path}[${index}]`));
        case 'map':
          if (!isObject(value)) return [[path, `expects a map, got ${describe(value)}`]];
          return Object.entries(value).flatMap(([key, inner]) => mismatch(inner, type.element, `${path}.${key}`));
        case 'union': {
          const outcomes = type.types.map((member) => mismatch(value, member, path));
          return outcomes.some((outcome) => outcome.length === 0) ? [] : (outcomes.sort((a, b) => a.length - b.length)[0] ?? []);
        }
        case 'ref': {
          const definition = spec.get('typeDefinition', type.reference);
          if (!isObject(value)) return [[path, `expects an object (${definition.name}), got ${describe(value)}`]];
          return checkProperties(value, definition.properties, path, definition.name);
        }
        default:
          return [[path, `has a type the check does not know: ${JSON.stringify(type)}`]];
      }
    };

    const checkProperties = (
      value: JsonObject,
      properties: ResourceProperties,
      path: string,
      typeName?: string,
    ): Array<[string, string]> => {
      const found: Array<[string, string]> = [];
      const at = (name: string) => (path === '' ? name : `${path}.${name}`);
      for (const [name, inner] of Object.entries(value)) {
        const property = properties[name];
        if (property === undefined) {
          found.push([
            at(name),
            `unknown property${typeName ? ` of ${typeName}` : ''} (known: ${Object.keys(properties).sort().join(', ')})`,
          ]);
          continue;
        }
        const types = [property.type, ...(property.previousTypes ?? [])];
        const outcomes = types.map((type) => mismatch(inner, type, at(name)));
        if (!outcomes.some((outcome) => outcome.length === 0)) found.push(...(outcomes[0] ?? []));
      }
      for (const [name, property] of Object.entries(properties)) {
        if (property.required && !(name in value))
          found.push([at(name), `required property${typeName ? ` of ${typeName}` : ''} is missing`]);
      }
      return found;
    };

    for (const key of Object.keys(resource)) if (!RESOURCE_KEYS.has(key)) report('', `unknown resource attribute ${key}`);
    for (const dependency of [resource.DependsOn ?? []].flat()) {
      if (typeof dependency !== 'string' || !(dependency in resources))
        report('', `DependsOn ${JSON.stringify(dependency)}, which is not a resource of the template`);
    }
    if (resource.Condition !== undefined && !conditions.has(String(resource.Condition)))
      report('', `Condition ${JSON.stringify(resource.Condition)} is not declared`);
    const properties = resource.Properties ?? {};
    if (!isObject(properties)) {
      report('', 'Properties is not an object');
      continue;
    }
    checkReferences(properties, 'Properties');
    if (isCustom(resource.Type)) {
      if (!('ServiceToken' in properties)) report('ServiceToken', 'a custom resource needs a ServiceToken');
      continue;
    }
    const resourceSpec = specOf(resource.Type);
    if (resourceSpec === undefined) {
      report('', `resource type ${resource.Type} does not exist in the CloudFormation specification`);
      continue;
    }
    for (const [path, message] of checkProperties(properties, resourceSpec.properties, '')) report(path, message);
  }
  return problems;
}

function enumCheck(value: string, allowed: readonly string[], path: string): Array<[string, string]> {
  return allowed.includes(value) ? [] : [[path, `${JSON.stringify(value)} is not one of the allowed values ${allowed.join(', ')}`]];
}

function describe(value: unknown): string {
  if (Array.isArray(value)) return 'a list';
  if (isObject(value)) return `an object with ${Object.keys(value).join(', ') || 'no keys'}`;
  return JSON.stringify(value);
}

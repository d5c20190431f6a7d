// The walker that makes zod's JSON Schema structural (src/crd/schema/structural.ts, unions.ts).
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { crdSchemaOf } from '../../src/crd/schema/crds.ts';
import { CrdSchemaError, structural } from '../../src/crd/schema/structural.ts';

describe('structural()', () => {
  it('inlines a $ref, keeping the referring node its own description', () => {
    const schema = structural({
      type: 'object',
      properties: { auth: { $ref: '#/$defs/Auth', description: 'how keyroll logs in' } },
      $defs: { Auth: { type: 'object', properties: { role: { type: 'string' } } } },
    });
    expect(schema).toEqual({
      type: 'object',
      properties: {
        auth: {
          type: 'object',
          properties: { role: { type: 'string' } },
          description: 'how keyroll logs in',
        },
      },
    });
  });

  it('inlines a schema zod writes once and refers to (a registered id)', () => {
    const Shared = z.strictObject({ name: z.string() }).meta({ id: 'Shared' });
    const schema = crdSchemaOf(z.strictObject({ a: Shared, b: Shared }));
    expect(schema).toEqual({
      type: 'object',
      properties: {
        a: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
        b: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
      },
      required: ['a', 'b'],
    });
  });

  it('refuses a recursive $ref: a structural schema is a finite tree', () => {
    expect(() =>
      structural({
        type: 'object',
        properties: { next: { $ref: '#/$defs/Node' } },
        $defs: { Node: { type: 'object', properties: { next: { $ref: '#/$defs/Node' } } } },
      }),
    ).toThrow(/recursive/);
  });

  it('turns a discriminated union into one object: every field, the discriminator enum, and CEL per branch', () => {
    const Credential = z.discriminatedUnion('type', [
      z.strictObject({ type: z.literal('bearer'), token: z.string() }),
      z.strictObject({ type: z.literal('oauth2'), clientId: z.string(), scope: z.string().optional() }),
    ]);
    expect(crdSchemaOf(Credential)).toEqual({
      type: 'object',
      properties: {
        type: { type: 'string', enum: ['bearer', 'oauth2'] },
        token: { type: 'string' },
        clientId: { type: 'string' },
        scope: { type: 'string' },
      },
      required: ['type'],
      'x-kubernetes-validations': [
        {
          rule: "!(has(self.token)) || self.type in ['bearer']",
          message: 'token applies only to type bearer',
          fieldPath: '.token',
        },
        {
          rule: "!(has(self.clientId)) || self.type in ['oauth2']",
          message: 'clientId applies only to type oauth2',
          fieldPath: '.clientId',
        },
        {
          rule: "!(has(self.scope)) || self.type in ['oauth2']",
          message: 'scope applies only to type oauth2',
          fieldPath: '.scope',
        },
        {
          rule: "self.type != 'bearer' || has(self.token)",
          message: 'token is required for type bearer',
          fieldPath: '.token',
        },
        {
          rule: "self.type != 'oauth2' || has(self.clientId)",
          message: 'clientId is required for type oauth2',
          fieldPath: '.clientId',
        },
      ],
    });
  });

  it('merges an object field two branches shape differently, one level down, with guarded rules', () => {
    const Store = z.discriminatedUnion('kind', [
      z.strictObject({ kind: z.literal('aws'), quotas: z.strictObject({ writes: z.number() }).optional() }),
      z.strictObject({
        kind: z.literal('vault'),
        quotas: z.strictObject({ maxWait: z.number() }).optional(),
      }),
    ]);
    const schema = crdSchemaOf(Store);
    expect(schema['properties']).toMatchObject({
      quotas: { type: 'object', properties: { writes: { type: 'number' }, maxWait: { type: 'number' } } },
    });
    expect(schema['x-kubernetes-validations']).toEqual(
      expect.arrayContaining([
        {
          rule: "!(has(self.quotas) && has(self.quotas.writes)) || self.kind in ['aws']",
          message: 'quotas.writes applies only to kind aws',
          fieldPath: '.quotas.writes',
        },
        {
          rule: "!(has(self.quotas) && has(self.quotas.maxWait)) || self.kind in ['vault']",
          message: 'quotas.maxWait applies only to kind vault',
          fieldPath: '.quotas.maxWait',
        },
      ]),
    );
  });

  it('reaches a field named by a CEL reserved word as __name__', () => {
    const Store = z.discriminatedUnion('kind', [
      z.strictObject({ kind: z.literal('vault'), namespace: z.string().optional() }),
      z.strictObject({ kind: z.literal('file') }),
    ]);
    expect(crdSchemaOf(Store)['x-kubernetes-validations']).toEqual([
      {
        rule: "!(has(self.__namespace__)) || self.kind in ['vault']",
        message: 'namespace applies only to kind vault',
        fieldPath: '.namespace',
      },
    ]);
  });

  it('drops additionalProperties: false and defaults, keeps a map (z.record) and metadata of x-kubernetes-*', () => {
    const schema = crdSchemaOf(
      z.strictObject({
        tags: z.record(z.string(), z.string()).default({}),
        list: z.array(z.string()).meta({ 'x-kubernetes-list-type': 'set' }),
      }),
    );
    expect(schema).toEqual({
      type: 'object',
      properties: {
        tags: { type: 'object', additionalProperties: { type: 'string' } },
        list: { type: 'array', items: { type: 'string' }, 'x-kubernetes-list-type': 'set' },
      },
      required: ['list'],
    });
  });

  it('refuses what has no structural form, naming where: a union without a discriminator, an unknown keyword', () => {
    const noDiscriminator = z.union([z.strictObject({ a: z.string() }), z.strictObject({ b: z.string() })]);
    expect(() => crdSchemaOf(z.strictObject({ field: noDiscriminator }))).toThrow(
      expect.objectContaining({ code: 'KR_CRD_SCHEMA', at: '/properties/field' }),
    );
    expect(() => structural({ type: 'object', patternProperties: {} })).toThrow(CrdSchemaError);
    expect(() => crdSchemaOf(z.union([z.string(), z.number()]))).toThrow(/only unions of objects/);
  });
});

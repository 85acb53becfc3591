import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

// Typed keys of the custom search attributes registered from temporal-config/search-attributes.json.
export const SA = {
  AccountId: defineSearchAttributeKey('AccountId', SearchAttributeType.KEYWORD),
  KeyId: defineSearchAttributeKey('KeyId', SearchAttributeType.KEYWORD),
  Model: defineSearchAttributeKey('Model', SearchAttributeType.KEYWORD),
  BillingSource: defineSearchAttributeKey('BillingSource', SearchAttributeType.KEYWORD),
  Kind: defineSearchAttributeKey('Kind', SearchAttributeType.KEYWORD),
  Status: defineSearchAttributeKey('Status', SearchAttributeType.KEYWORD),
  ProjectId: defineSearchAttributeKey('ProjectId', SearchAttributeType.KEYWORD),
  // the panel's node operations (PANEL.md section 4): the account, the node and the site
  OrgId: defineSearchAttributeKey('OrgId', SearchAttributeType.KEYWORD),
  NodeName: defineSearchAttributeKey('NodeName', SearchAttributeType.KEYWORD),
  SiteId: defineSearchAttributeKey('SiteId', SearchAttributeType.KEYWORD),
  // The panel's long work. The dev server's SQL visibility has only 10 Keyword slots (all taken), so
  // a legacy import's id is a one-element KeywordList (`ImportId = 'x'` still finds it) and the
  // period of a metered hour or closed month is the Datetime of its start (UTC), which also allows
  // ranges (`Period >= '2026-11-01T00:00:00Z'`).
  ImportId: defineSearchAttributeKey('ImportId', SearchAttributeType.KEYWORD_LIST),
  Period: defineSearchAttributeKey('Period', SearchAttributeType.DATETIME),
  // a settlement workflow's batch: `RequestIds = "<request id>"` finds any request's workflow
  RequestIds: defineSearchAttributeKey('RequestIds', SearchAttributeType.KEYWORD_LIST),
  AccountIds: defineSearchAttributeKey('AccountIds', SearchAttributeType.KEYWORD_LIST),
};

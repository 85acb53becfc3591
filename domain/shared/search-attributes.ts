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
  // the panel's scheduled and long work: legacy imports, metered hours and closed months (YYYY-MM or
  // YYYY-MM-DDTHH), reconciliation passes
  ImportId: defineSearchAttributeKey('ImportId', SearchAttributeType.KEYWORD),
  Period: defineSearchAttributeKey('Period', SearchAttributeType.KEYWORD),
  PassId: defineSearchAttributeKey('PassId', SearchAttributeType.KEYWORD),
  // a settlement workflow's batch: `RequestIds = "<request id>"` finds any request's workflow
  RequestIds: defineSearchAttributeKey('RequestIds', SearchAttributeType.KEYWORD_LIST),
  AccountIds: defineSearchAttributeKey('AccountIds', SearchAttributeType.KEYWORD_LIST),
};

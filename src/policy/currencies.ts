// The currencies a block and a money call may name: ISO 4217's active codes, as a fixed list.
// Fixed in the source, not Intl.supportedValuesOf("currency"): that answer follows the ICU data
// of the Node build (Node 20 with ICU 78 lists HRK and ZWL and lacks VED), so the pure policy
// would decide differently from one Node version to the next.

/**
 * The alphabetic codes of ISO 4217 List One for real currencies, as written in December 2026
 * (check it against the maintenance agency's current List One when a currency changes):
 * Croatia (HRK, 2023) and Bulgaria (BGN, 2026) moved to the euro; Curaçao and Sint Maarten moved
 * from ANG to XCG (2025); Sierra Leone from SLL to SLE; Zimbabwe from ZWL to ZWG (2024); Cuba's
 * CUC is withdrawn. Left out on purpose, though List One holds them: funds and units of account
 * (BOV, CHE, CHW, CLF, COU, MXV, USN, UYI, UYW, XAD, XBA–XBD, XDR, XSU, XUA), precious metals (XAG,
 * XAU, XPD, XPT), the testing code XTS and "no currency" XXX. None of those is money an agent
 * should be spending. A new currency is refused until someone adds it here.
 */
export const currency_codes: readonly string[] = Object.freeze([
  "AED", "AFN", "ALL", "AMD", "AOA", "ARS", "AUD", "AWG", "AZN",
  "BAM", "BBD", "BDT", "BHD", "BIF", "BMD", "BND", "BOB", "BRL", "BSD", "BTN", "BWP", "BYN", "BZD",
  "CAD", "CDF", "CHF", "CLP", "CNY", "COP", "CRC", "CUP", "CVE", "CZK",
  "DJF", "DKK", "DOP", "DZD",
  "EGP", "ERN", "ETB", "EUR",
  "FJD", "FKP",
  "GBP", "GEL", "GHS", "GIP", "GMD", "GNF", "GTQ", "GYD",
  "HKD", "HNL", "HTG", "HUF",
  "IDR", "ILS", "INR", "IQD", "IRR", "ISK",
  "JMD", "JOD", "JPY",
  "KES", "KGS", "KHR", "KMF", "KPW", "KRW", "KWD", "KYD", "KZT",
  "LAK", "LBP", "LKR", "LRD", "LSL", "LYD",
  "MAD", "MDL", "MGA", "MKD", "MMK", "MNT", "MOP", "MRU", "MUR", "MVR", "MWK", "MXN", "MYR", "MZN",
  "NAD", "NGN", "NIO", "NOK", "NPR", "NZD",
  "OMR",
  "PAB", "PEN", "PGK", "PHP", "PKR", "PLN", "PYG",
  "QAR",
  "RON", "RSD", "RUB", "RWF",
  "SAR", "SBD", "SCR", "SDG", "SEK", "SGD", "SHP", "SLE", "SOS", "SRD", "SSP", "STN", "SVC", "SYP", "SZL",
  "THB", "TJS", "TMT", "TND", "TOP", "TRY", "TTD", "TWD", "TZS",
  "UAH", "UGX", "USD", "UYU", "UZS",
  "VED", "VES", "VND", "VUV",
  "WST",
  "XAF", "XCD", "XCG", "XOF", "XPF",
  "YER",
  "ZAR", "ZMW", "ZWG",
]);

/** Private, so nothing can add to it: a frozen array cannot change, a Set always can. */
const currency_code_set: ReadonlySet<string> = new Set(currency_codes);

/** A currency's shape as sent: three ASCII letters, either case. */
export const currency_pattern = /^[A-Za-z]{3}$/;

/**
 * What is wrong with `currency`, worded to follow its field's name ("currency …" in a refusal,
 * "currency: …" in a 422), or undefined for an active ISO 4217 code in either case. The shape is
 * checked first, so only three ASCII letters reach toUpperCase and the message.
 */
export function currencyProblem(currency: unknown): string | undefined {
  if (typeof currency !== "string" || !currency_pattern.test(currency)) return "must be exactly three ASCII letters";
  if (!currency_code_set.has(currency.toUpperCase())) return `"${currency}" is not an ISO 4217 currency code`;
  return undefined;
}

// Time is passed in, never read inside policy or ledger logic.

export type Clock = () => Date;

export const systemClock: Clock = () => new Date();

/** The version of this package, as package.json states it (a test keeps them equal). */
export const VERSION = "0.1.0";

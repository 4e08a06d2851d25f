/**
 * `npm start --serve` (without `--`) gives the flag to npm, not to captcha-fleet: npm keeps it as
 * its own configuration (`npm_config_serve=true` in the script's environment) and starts the plain
 * demo. Detected here so the run stops and says what to type instead.
 */

/** `planThreads` → `plan_threads`: how npm names a `--plan-threads` it kept in `npm_config_*`. */
function npmConfigName(key: string): string {
  return key.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

/** `planThreads` → `--plan-threads`. */
function flagName(key: string): string {
  return `--${key.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`)}`;
}

/**
 * The flags of `options` (a command's table of options by key, each with its commander `flags`: `--tasks <n>`) that npm took as its
 * own when `npm <lifecycle>` ran without `--`, each as it should have been typed (`--serve`,
 * `--plan-threads 3`, `--tasks <n>` where npm kept only the name); empty unless this process is
 * npm's `lifecycle` script.
 */
export function flagsNpmKept(
  options: Readonly<Record<string, { readonly flags: string }>>,
  lifecycle: string,
  env: NodeJS.ProcessEnv = process.env,
): string[] {
  if (env.npm_lifecycle_event !== lifecycle) return [];
  const kept: string[] = [];
  for (const [key, row] of Object.entries(options)) {
    const value = env[`npm_config_${npmConfigName(key)}`];
    if (value === undefined) continue;
    // npm takes `--tasks 5` as the switch `--tasks` and an argument `5`: then only the name is certain.
    const bare = value === 'true' || value === '';
    const arg = /<[^>]+>/.exec(row.flags)?.[0];
    kept.push(!bare ? `${flagName(key)} ${value}` : arg ? `${flagName(key)} ${arg}` : flagName(key));
  }
  return kept;
}

/** The error for flags npm kept: what happened and the command to type. */
export function npmKeptFlagsMessage(kept: readonly string[], lifecycle: string): string {
  return (
    `error: npm took ${kept.join(', ')} as its own option${kept.length === 1 ? '' : 's'}, so \`npm ${lifecycle}\` would run without ${kept.length === 1 ? 'it' : 'them'}. ` +
    `npm passes flags on only after \`--\`: type \`npm ${lifecycle} -- ${kept.join(' ')}\`.`
  );
}

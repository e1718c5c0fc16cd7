// ESLint: correctness rules only; layout is Prettier's (.prettierrc.json), checked by `npm run lint`.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/', 'src/*/generated/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2023, sourceType: 'module', globals: { process: 'readonly', console: 'readonly' } },
    rules: {
      // `_name` marks a parameter or binding kept for its position or for documentation.
      // Prettier decides line breaks; this rule disagrees with its chained calls.
      'no-unexpected-multiline': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // Long functions hide their phases: split them into named steps with typed results.
    files: ['src/**'],
    rules: { 'max-lines-per-function': ['error', { max: 120, skipBlankLines: true, skipComments: true }] },
  },
  {
    // Tests and benches read arbitrary JSON bodies from the API and poke at internals; they match
    // output exactly (aligned columns, ANSI colours); `handler.apply(prior, planned)` is the provider's.
    files: ['test/**', 'bench/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off', 'no-regex-spaces': 'off', 'no-control-regex': 'off', 'prefer-spread': 'off' },
  },
);

// Shared by the bin/ entries: runs an entry point from dist/ (npm run build) when it was built,
// with source maps for stack traces, else the TypeScript source through tsx (development).
const fs = require('node:fs');
const path = require('node:path');

module.exports = function run(entry) {
  const compiled = path.join(__dirname, '..', 'dist', `${entry}.js`);
  if (fs.existsSync(compiled)) {
    process.setSourceMapsEnabled(true);
    require(compiled);
  } else {
    require('tsx/cjs');
    require(path.join(__dirname, '..', `${entry}.ts`));
  }
};

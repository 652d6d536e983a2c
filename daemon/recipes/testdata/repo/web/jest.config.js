module.exports = { testEnvironment: 'node' };
